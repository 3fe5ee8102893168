package relay

import (
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

func snapshotOf(types map[string]map[string]string) *lkgcache.Snapshot {
	s := &lkgcache.Snapshot{WrittenAt: time.Unix(1900000000, 0)}
	for typ, res := range types {
		ts := lkgcache.TypeState{TypeURL: typ, Version: "sys"}
		for name, ver := range res {
			ts.Resources = append(ts.Resources, lkgcache.Resource{Name: name, Version: ver, TypeURL: typ, Body: []byte(name)})
		}
		s.Types = append(s.Types, ts)
	}
	return s
}

// describe renders an answer as "res=[a@1 b@1] removed=[x]", or "none".
func describe(resp *discoveryv3.DeltaDiscoveryResponse) string {
	if resp == nil {
		return "none"
	}
	var res []string
	for _, r := range resp.GetResources() {
		res = append(res, r.GetName()+"@"+r.GetVersion())
	}
	slices.Sort(res)
	return fmt.Sprintf("res=%v removed=%v", res, resp.GetRemovedResources())
}

func TestDeltaCacheAnswers(t *testing.T) {
	snap := snapshotOf(map[string]map[string]string{
		clusterType:  {"a": "1", "b": "1"},
		listenerType: {"l": "1"},
	})
	const eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	for _, tc := range []struct {
		name     string
		requests []*discoveryv3.DeltaDiscoveryRequest
		want     []string // one per request
	}{
		{"fresh Envoy gets everything", []*discoveryv3.DeltaDiscoveryRequest{
			{TypeUrl: clusterType},
			{TypeUrl: clusterType, ResponseNonce: "zoneproxy-lkg-1"},
		}, []string{"res=[a@1 b@1] removed=[]", "none"}},
		{"what Envoy holds at the same version is not resent", []*discoveryv3.DeltaDiscoveryRequest{
			{TypeUrl: clusterType, InitialResourceVersions: map[string]string{"a": "1", "b": "0"}},
		}, []string{"res=[b@1] removed=[]"}},
		{"what the cache lacks is removed", []*discoveryv3.DeltaDiscoveryRequest{
			{TypeUrl: listenerType, InitialResourceVersions: map[string]string{"l": "1", "gone": "3"}},
		}, []string{"res=[] removed=[gone]"}},
		{"a wildcard type is always answered once", []*discoveryv3.DeltaDiscoveryRequest{
			{TypeUrl: listenerType, InitialResourceVersions: map[string]string{"l": "1"}},
		}, []string{"res=[] removed=[]"}},
		{"names, then more names", []*discoveryv3.DeltaDiscoveryRequest{
			{TypeUrl: clusterType, ResourceNamesSubscribe: []string{"a"}},
			{TypeUrl: clusterType, ResourceNamesSubscribe: []string{"b", "unknown"}},
			{TypeUrl: clusterType, ResourceNamesUnsubscribe: []string{"a"}},
		}, []string{"res=[a@1] removed=[]", "res=[b@1] removed=[]", "none"}},
		{"names the cache lacks wait", []*discoveryv3.DeltaDiscoveryRequest{
			{TypeUrl: eds, ResourceNamesSubscribe: []string{"a"}},
		}, []string{"none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := delta{}.cacheServer(snap)
			for i, req := range tc.requests {
				read, err := delta{}.readRequest(mustMarshal(t, req))
				if err != nil {
					t.Fatal(err)
				}
				b, err := cs.answer(read)
				if err != nil {
					t.Fatal(err)
				}
				got := "none"
				if b != nil {
					resp := &discoveryv3.DeltaDiscoveryResponse{}
					if err := proto.Unmarshal(b, resp); err != nil {
						t.Fatalf("the cache's answer is not a DeltaDiscoveryResponse: %v", err)
					}
					if resp.GetTypeUrl() != req.GetTypeUrl() || resp.GetNonce() == "" {
						t.Errorf("answer type %q nonce %q", resp.GetTypeUrl(), resp.GetNonce())
					}
					for _, r := range resp.GetResources() {
						if r.GetResource().GetTypeUrl() != req.GetTypeUrl() || string(r.GetResource().GetValue()) != r.GetName() {
							t.Errorf("resource %s: body %q of type %q", r.GetName(), r.GetResource().GetValue(), r.GetResource().GetTypeUrl())
						}
					}
					got = describe(resp)
				}
				if got != tc.want[i] {
					t.Errorf("request %d: %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
}

// After a reconnect Envoy keeps only the resources it declared; the
// relay's view of what Envoy holds follows.
func TestEnvoyStateFollowsEnvoyAcrossStreams(t *testing.T) {
	r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(t).caPEM}, Token: staticToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	stream := func(initial map[string]string, resp *discoveryv3.DeltaDiscoveryResponse, nack bool) {
		o := newObserver(r)
		observeDeltaRequest(t, o, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, InitialResourceVersions: initial})
		if err := o.response(delta{}, mustMarshal(t, resp), false); err != nil {
			t.Fatal(err)
		}
		ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: resp.GetNonce()}
		if nack {
			ack.ErrorDetail = &rpcstatus.Status{Message: "bad"}
		}
		observeDeltaRequest(t, o, ack)
	}
	stream(nil, deltaResponse(t, listenerType, "1", "n1", "a", "b"), false)
	if got := r.Names(listenerType); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the first stream: %v", got)
	}
	// Envoy reconnects holding a@1 only (b was of another version).
	stream(map[string]string{"a": "1", "b": "0"}, deltaResponse(t, listenerType, "2", "n2", "c"), false)
	if got := r.Names(listenerType); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("after the reconnect: %v", got)
	}
	// A NACKed response changes nothing.
	stream(map[string]string{"a": "1", "c": "2"}, deltaResponse(t, listenerType, "3", "n3", "d"), true)
	if got := r.Names(listenerType); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("after a NACK: %v", got)
	}
}

func observeDeltaRequest(t *testing.T, o *observer, m *discoveryv3.DeltaDiscoveryRequest) {
	t.Helper()
	req, err := delta{}.readRequest(mustMarshal(t, m))
	if err != nil {
		t.Fatal(err)
	}
	delta{}.observeRequest(o, req)
}
