package relay

import (
	"context"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// A new registration (a zone egress held back as NotReady until Envoy has
// its listener) takes a new stream whose node says what the agent says
// now; Envoy's own stream stays open and carries on on it, resumed with
// the versions Envoy holds.
func TestReregisterRegistersAnewWhileEnvoyCarriesOn(t *testing.T) {
	p := newPKI(t)
	cpv := &versionedCP{version: "v1"}
	cp := startFakeCP(t, p, "", cpv.script(t))
	cache := openCache(t, t.TempDir())
	t.Cleanup(func() { _ = cache.Close(context.Background()) })
	var egress atomic.Value
	egress.Store("NotReady")
	ev := newEvents()
	r := startRelay(t, p, cp.addr, staticToken("tok"), ev, func(o *Options) {
		o.Cache = cache
		o.AgentMetadata = func(md *structpb.Struct, _ bool) {
			md.Fields["egress"] = structpb.NewStringValue(egress.Load().(string))
		}
	})
	envoy := dialEnvoy(t, r, deltaMethod)
	subscribe(t, envoy, clusterType, nil)
	subscribe(t, envoy, listenerType, nil)
	ev.await(t, "both ACKs", func(e *events) bool { return len(e.accepts) == 2 })

	cpv.mu.Lock()
	cpv.version = "v2"
	cpv.mu.Unlock()
	before := cpv.received()
	egress.Store("Ready")
	r.Reregister()

	// The new stream's first request is the one with a node (the first
	// stream's last ACK may come after before).
	var first *discoveryv3.DeltaDiscoveryRequest
	for n := 2; first == nil; n++ {
		for _, raw := range cpv.requestsSince(t, before, n) {
			if req := decodeDeltaRequest(t, raw); req.GetNode() != nil {
				first = req
				break
			}
		}
	}
	if got := first.GetNode().GetMetadata().GetFields()["egress"].GetStringValue(); got != "Ready" {
		t.Fatalf("the new stream registers the egress %q, want Ready", got)
	}
	if got := first.GetInitialResourceVersions(); first.GetTypeUrl() != clusterType || !maps.Equal(got, map[string]string{"Cluster-v1": "v1"}) {
		t.Fatalf("the new stream opened with %v", first)
	}
	for range 2 {
		resp := envoy.recvDelta() // on Envoy's first stream: it did not reconnect
		if len(resp.GetResources()) != 1 || !strings.HasSuffix(resp.GetResources()[0].GetName(), "-v2") {
			t.Fatalf("Envoy got %v", resp)
		}
		envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	if st := r.State(); st.Upstream.State != Connected {
		t.Errorf("once the new registration is answered, the stream is %q, want connected", st.Upstream.State)
	}
	if n := cp.streamCount(); n != 2 {
		t.Errorf("the control plane saw %d streams, want the first and the new registration's", n)
	}
}
