package xdsrelay

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

func TestScanResponsesReadsWhatProtobufReads(t *testing.T) {
	l := listener(t, "zone-ingress", 3)
	wrapped, err := anypb.New(&discoveryv3.Resource{Name: "wrapped", Version: "9", Resource: listener(t, "wrapped", 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		scan func([]byte) (*pendingResponse, string, error)
		msg  []byte
		want string
	}{
		{"delta", scanDeltaResponse, mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: "v3", TypeUrl: listenerType, Nonce: "n3",
			Resources: []*discoveryv3.Resource{
				{Name: "zone-ingress", Version: "3", Resource: l},
				{ResourceName: &discoveryv3.ResourceName{Name: "by-resource-name"}, Version: "4", Resource: l},
				{Name: "name-only", Version: "5"},
			},
			RemovedResources:     []string{"old"},
			RemovedResourceNames: []*discoveryv3.ResourceName{{Name: "older"}},
		}), "v3 Listener n3 [zone-ingress@3 by-resource-name@4] removed [old older] replace=false"},
		{"state of the world", scanSotwResponse, mustMarshal(t, &discoveryv3.DiscoveryResponse{
			VersionInfo: "v4", TypeUrl: listenerType, Nonce: "n4", Resources: []*anypb.Any{l, wrapped},
		}), "v4 Listener n4 [zone-ingress@ wrapped@9] removed [] replace=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nonce, err := tc.scan(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			var res []string
			for _, r := range p.resources {
				if r.TypeURL != listenerType || len(r.Body) == 0 {
					t.Errorf("%s: type %q, %d bytes", r.Name, r.TypeURL, len(r.Body))
				}
				res = append(res, r.Name+"@"+r.Version)
			}
			got := fmt.Sprintf("%s %s %s %v removed %v replace=%t", p.version, shortType(p.typeURL), nonce, res, p.removed, p.replace)
			if got != tc.want {
				t.Fatalf("scanned %s\nwant    %s", got, tc.want)
			}
			if _, _, err := tc.scan(tc.msg[:len(tc.msg)-3]); err == nil {
				t.Error("a truncated response scanned without error")
			}
		})
	}
}

func FuzzScanResponses(f *testing.F) {
	f.Add(mustMarshal(f, deltaResponse(f, listenerType, "1", "n", "a", "b")))
	f.Add(mustMarshal(f, &discoveryv3.DiscoveryResponse{TypeUrl: listenerType, Resources: []*anypb.Any{listener(f, "x", 2)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = scanDeltaResponse(b)
		_, _, _ = scanSotwResponse(b)
	})
}

func TestScanRequestsReadsWhatProtobufReads(t *testing.T) {
	delta, err := scanDeltaRequest(mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{
		Node: node, TypeUrl: clusterType, ResourceNamesSubscribe: []string{"a", "b"}, ResourceNamesUnsubscribe: []string{"c"},
		InitialResourceVersions: map[string]string{"a": "1", "d": ""}, ResponseNonce: "n1",
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bad cluster"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%+v", *delta); got != `{typeURL:`+clusterType+` nonce:n1 nack:true errMsg:bad cluster subscribe:[a b] unsubscribe:[c] initial:map[a:1 d:]}` {
		t.Errorf("delta request read as %s", got)
	}
	ack, _ := scanDeltaRequest(mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: "n2", ErrorDetail: &rpcstatus.Status{}}))
	if !ack.nack {
		t.Error("an error_detail without a message is still a NACK")
	}
	sotw, err := scanSotwRequest(mustMarshal(t, &discoveryv3.DiscoveryRequest{
		Node: node, VersionInfo: "v1", TypeUrl: listenerType, ResourceNames: []string{"x"}, ResponseNonce: "n3",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%+v", *sotw); got != `{typeURL:`+listenerType+` nonce:n3 nack:false errMsg: subscribe:[x] unsubscribe:[] initial:map[]}` {
		t.Errorf("SotW request read as %s", got)
	}
}

// The cache's answers are what go-control-plane's types read back.
func TestCacheAnswersAreDiscoveryResponses(t *testing.T) {
	res := []lkgcache.Resource{{Name: "a", Version: "1", TypeURL: listenerType, Body: listener(t, "a", 1).GetValue()}, {Name: "e", TypeURL: listenerType}}
	d := &discoveryv3.DeltaDiscoveryResponse{}
	if err := proto.Unmarshal(deltaResponseBytes(listenerType, "v", "n", res, []string{"gone"}), d); err != nil {
		t.Fatal(err)
	}
	want := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "v", TypeUrl: listenerType, Nonce: "n", RemovedResources: []string{"gone"},
		Resources: []*discoveryv3.Resource{
			{Name: "a", Version: "1", Resource: &anypb.Any{TypeUrl: listenerType, Value: res[0].Body}},
			{Name: "e", Resource: &anypb.Any{TypeUrl: listenerType}},
		}}
	if !proto.Equal(d, want) {
		t.Errorf("delta answer %v\nwant %v", d, want)
	}
	s := &discoveryv3.DiscoveryResponse{}
	if err := proto.Unmarshal(sotwResponseBytes(listenerType, "v", "n", res[:1]), s); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(s, &discoveryv3.DiscoveryResponse{VersionInfo: "v", TypeUrl: listenerType, Nonce: "n", Resources: []*anypb.Any{{TypeUrl: listenerType, Value: res[0].Body}}}) {
		t.Errorf("SotW answer %v", s)
	}
}

func FuzzScanRequests(f *testing.F) {
	f.Add(mustMarshal(f, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType, InitialResourceVersions: map[string]string{"a": "1"}}))
	f.Add(mustMarshal(f, &discoveryv3.DiscoveryRequest{TypeUrl: clusterType, ResponseNonce: "n", ErrorDetail: &rpcstatus.Status{Message: "x"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = scanDeltaRequest(b)
		_, _ = scanSotwRequest(b)
	})
}
