package relay

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// What the relay tracks of a response: resources with bodies, by name or
// by resource_name, name-only entries left out; removals by either field;
// state-of-the-world resources named by field 1 or unwrapped.
func TestReadResponses(t *testing.T) {
	l := listener(t, "zone-ingress", 3)
	wrapped, err := anypb.New(&discoveryv3.Resource{Name: "wrapped", Version: "9", Resource: listener(t, "wrapped", 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kind streamKind
		msg  []byte
		want string
	}{
		{"delta", delta{}, mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: "v3", TypeUrl: listenerType, Nonce: "n3",
			Resources: []*discoveryv3.Resource{
				{Name: "zone-ingress", Version: "3", Resource: l},
				{ResourceName: &discoveryv3.ResourceName{Name: "by-resource-name"}, Version: "4", Resource: l},
				{Name: "name-only", Version: "5"},
			},
			RemovedResources:     []string{"old"},
			RemovedResourceNames: []*discoveryv3.ResourceName{{Name: "older"}},
		}), "v3 Listener n3 [zone-ingress@3 by-resource-name@4] removed [old older] replace=false"},
		{"state of the world", sotw{}, mustMarshal(t, &discoveryv3.DiscoveryResponse{
			VersionInfo: "v4", TypeUrl: listenerType, Nonce: "n4", Resources: []*anypb.Any{l, wrapped},
		}), "v4 Listener n4 [zone-ingress@ wrapped@9] removed [] replace=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nonce, err := tc.kind.readResponse(tc.msg)
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
				t.Fatalf("read %s\nwant %s", got, tc.want)
			}
			if _, _, err := tc.kind.readResponse(tc.msg[:len(tc.msg)-3]); err == nil {
				t.Error("a truncated response read without error")
			}
		})
	}
}

func TestReadRequests(t *testing.T) {
	d, err := delta{}.readRequest(mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{
		Node: node, TypeUrl: clusterType, ResourceNamesSubscribe: []string{"a", "b"}, ResourceNamesUnsubscribe: []string{"c"},
		InitialResourceVersions: map[string]string{"a": "1", "d": ""}, ResponseNonce: "n1",
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bad cluster"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(d.node, node) {
		t.Errorf("delta request's node %v", d.node)
	}
	d.node = nil
	if got := fmt.Sprintf("%+v", *d); got != `{node:<nil> typeURL:`+clusterType+` nonce:n1 nack:true errMsg:bad cluster subscribe:[a b] unsubscribe:[c] initial:map[a:1 d:]}` {
		t.Errorf("delta request read as %s", got)
	}
	ack, _ := delta{}.readRequest(mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: "n2", ErrorDetail: &rpcstatus.Status{}}))
	if !ack.nack {
		t.Error("an error_detail without a message is still a NACK")
	}
	s, err := sotw{}.readRequest(mustMarshal(t, &discoveryv3.DiscoveryRequest{
		VersionInfo: "v1", TypeUrl: listenerType, ResourceNames: []string{"x"}, ResponseNonce: "n3",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%+v", *s); got != `{node:<nil> typeURL:`+listenerType+` nonce:n3 nack:false errMsg: subscribe:[x] unsubscribe:[] initial:map[]}` {
		t.Errorf("SotW request read as %s", got)
	}
}

// Whatever a control plane sends, reading it does not panic.
func FuzzReadResponses(f *testing.F) {
	f.Add(mustMarshal(f, deltaResponse(f, listenerType, "1", "n", "a", "b")))
	f.Add(mustMarshal(f, &discoveryv3.DiscoveryResponse{TypeUrl: listenerType, Resources: []*anypb.Any{listener(f, "x", 2)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = delta{}.readResponse(b)
		_, _, _ = sotw{}.readResponse(b)
	})
}
