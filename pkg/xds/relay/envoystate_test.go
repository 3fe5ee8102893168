package relay

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// stateBed observes delta listener responses and Envoy's answers to them
// on one stream. Each response is received into a buffer that is
// scribbled over once it was observed, as grpc reuses its buffers: what
// the relay keeps must not refer to them.
type stateBed struct {
	t *testing.T
	r *Relay
	o *observer
}

func newStateBed(t *testing.T) *stateBed {
	r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(t).caPEM}, Token: staticToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	b := &stateBed{t: t, r: r, o: newObserver(r)}
	observeDeltaRequest(t, b.o, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType})
	return b
}

func (b *stateBed) send(resp *discoveryv3.DeltaDiscoveryResponse) {
	raw := mustMarshal(b.t, resp)
	if err := b.o.response(delta{}, raw, false); err != nil {
		b.t.Fatal(err)
	}
	for i := range raw {
		raw[i] = 0xEE
	}
}

func (b *stateBed) answer(nonce string, nack bool) {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: nonce}
	if nack {
		req.ErrorDetail = &rpcstatus.Status{Message: "bad"}
	}
	observeDeltaRequest(b.t, b.o, req)
}

// wantState checks got holds versions, each resource with its own body.
func wantState(t *testing.T, what string, got []lkgcache.TypeState, versions map[string]string) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("%s: %d types", what, len(got))
	}
	held := map[string]string{}
	for _, res := range got[0].Resources {
		held[res.Name] = res.Version
		if a := listener(t, res.Name, 0); res.TypeURL != a.GetTypeUrl() || !bytes.Equal(res.Body, a.GetValue()) {
			t.Errorf("%s: %s's type or body was overwritten: %q %x", what, res.Name, res.TypeURL, res.Body)
		}
	}
	if !maps.Equal(held, versions) {
		t.Errorf("%s: holds %v, want %v", what, held, versions)
	}
}

// What Envoy holds, and what the cache was handed, keep their resources
// while newer responses, NACKed and superseded ones come and go.
func TestEnvoyStateOutlivesResponses(t *testing.T) {
	b := newStateBed(t)
	r, send, answer := b.r, b.send, b.answer
	send(deltaResponse(t, listenerType, "1", "n1", "a", "b"))
	answer("n1", false)
	send(deltaResponse(t, listenerType, "2", "n2", "a"))
	answer("n2", false)
	exported := r.envoyState.export()
	send(deltaResponse(t, listenerType, "3", "n3", "a", "c"))
	answer("n3", true)
	send(deltaResponse(t, listenerType, "4", "n4", "c"))
	send(deltaResponse(t, listenerType, "5", "n5", "a", "d"))
	answer("n5", false)
	// n3 was NACKed, n4 superseded, n2's a replaced by n5's.
	answer("n4", false) // too late: superseded
	send(deltaResponse(t, listenerType, "6", "n6", "b"))
	answer("n6", false)
	wantState(t, "handed to the cache after n2", exported, map[string]string{"a": "2", "b": "1"})
	wantState(t, "held after n6", r.envoyState.export(), map[string]string{"a": "5", "b": "6", "d": "5"})
	if got := r.Names(listenerType); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Errorf("names %v", got)
	}
	if len(b.o.pending) != 0 {
		t.Errorf("%d responses still pending after the last was ACKed", len(b.o.pending))
	}
}

// A delta response that names a resource twice (not what Kuma sends, but
// nothing stops a control plane) holds it once.
func TestADuplicateNameIsHeldOnce(t *testing.T) {
	b := newStateBed(t)
	b.send(deltaResponse(t, listenerType, "1", "n1", "y"))
	b.answer("n1", false)
	b.send(deltaResponse(t, listenerType, "2", "n2", "x", "x", "y"))
	b.answer("n2", false)
	b.send(deltaResponse(t, listenerType, "3", "n3", "z"))
	b.answer("n3", false)
	wantState(t, "held", b.r.envoyState.export(), map[string]string{"x": "2", "y": "2", "z": "3"})
}

// What Envoy subscribed to and was never answered is named: kuma-cp 2.14
// sends a zone ingress without MeshService no listeners at all.
func TestUnansweredNamesTheTypesEnvoyWaitsFor(t *testing.T) {
	r := &Relay{envoyState: envoyState{types: map[string]*typeState{}}}
	if got := r.Unanswered(); got != nil {
		t.Fatalf("before Envoy's stream: %v", got)
	}
	s := newSubscriptions()
	s.track(delta{}, nil, &request{node: node, typeURL: clusterType})
	s.track(delta{}, nil, &request{typeURL: listenerType})
	r.subs = s
	r.envoyState.apply(&pendingResponse{typeURL: clusterType, version: "1"}, nil)
	if got := r.Unanswered(); len(got) != 1 || got[0] != listenerType {
		t.Fatalf("unanswered %v, want the listeners", got)
	}
	r.envoyState.apply(&pendingResponse{typeURL: listenerType, version: "1"}, nil)
	if got := r.Unanswered(); len(got) != 0 {
		t.Fatalf("unanswered %v once both are held", got)
	}
}
