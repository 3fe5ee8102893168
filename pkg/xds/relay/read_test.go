package relay

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
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
		// The wire allows fields in any order and a message in parts.
		{"delta in parts", delta{}, append(mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{
			Nonce: "n1", Resources: []*discoveryv3.Resource{{Name: "first", Version: "1", Resource: l}}, RemovedResources: []string{"old"},
		}), mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: "v5", TypeUrl: listenerType, Nonce: "n5", Resources: []*discoveryv3.Resource{{Name: "second", Version: "2", Resource: l}},
		})...), "v5 Listener n5 [first@1 second@2] removed [old] replace=false"},
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
	f.Add(append(mustMarshal(f, deltaResponse(f, listenerType, "1", "n", "a")), mustMarshal(f, deltaResponse(f, listenerType, "2", "m", "b"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, nonce, err := delta{}.readResponse(b)
		if want := readDeltaWhole(b); fmt.Sprint(want) != fmt.Sprint(p, nonce, err != nil) {
			t.Errorf("read one resource at a time: %v %s %t\nread whole: %s", p, nonce, err != nil, want)
		}
		_, _, _ = sotw{}.readResponse(b)
	})
}

// readDeltaWhole is what delta.readResponse reads, decoding the response
// in one piece, as the fmt of (pendingResponse, nonce, failed).
func readDeltaWhole(b []byte) string {
	m := &discoveryv3.DeltaDiscoveryResponse{}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Sprint((*pendingResponse)(nil), "", true)
	}
	p := &pendingResponse{typeURL: m.GetTypeUrl(), version: m.GetSystemVersionInfo(), removed: m.GetRemovedResources(),
		resources: make([]lkgcache.Resource, 0, len(m.GetResources()))}
	for _, r := range m.GetResources() {
		if r.GetResource() != nil {
			p.resources = append(p.resources, p.resource(r))
		}
	}
	for _, n := range m.GetRemovedResourceNames() {
		p.removed = append(p.removed, n.GetName())
	}
	return fmt.Sprint(p, m.GetNonce(), false)
}
