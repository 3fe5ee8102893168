package xdsrelay

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/zoneproxy/zoneproxy/pkg/bootstraprewrite"
	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// A response's bytes are reused once nothing refers to them: what Envoy
// still holds of an older response, and what the cache was handed, keep
// their bytes while newer responses, NACKed and superseded ones come and
// go. Recycled bytes are scribbled over here, so any later read shows.
// slabBed observes delta listener responses, each in its own slab, and
// scribbles over every slab it recycles, counting them.
type slabBed struct {
	t        *testing.T
	r        *Relay
	o        *observer
	recycled int
}

func newSlabBed(t *testing.T) *slabBed {
	b := &slabBed{t: t}
	recycle = func(s *slab) {
		b.recycled++
		for i := range s.b {
			s.b[i] = 0xEE
		}
	}
	t.Cleanup(func() { recycle = func(s *slab) { slabPool.Put(s) } })
	r, err := New(Options{SocketPath: "/x", Upstream: bootstraprewrite.Upstream{Address: "cp:5678", CAPEM: newPKI(t).caPEM}, Token: staticToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	b.r, b.o = r, newObserver(r)
	observeDeltaRequest(t, b.o, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType})
	return b
}

func (b *slabBed) send(resp *discoveryv3.DeltaDiscoveryResponse) {
	raw := mustMarshal(b.t, resp)
	sl := newSlab(len(raw))
	copy(sl.b, raw)
	if err := b.o.response(delta{}, sl.b, sl, false); err != nil {
		b.t.Fatal(err)
	}
}

func (b *slabBed) answer(nonce string, nack bool) {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: nonce}
	if nack {
		req.ErrorDetail = &rpcstatus.Status{Message: "bad"}
	}
	observeDeltaRequest(b.t, b.o, req)
}

func TestRecycledResponseBytesAreNeverRead(t *testing.T) {
	b := newSlabBed(t)
	r, send, answer := b.r, b.send, b.answer
	send(deltaResponse(t, listenerType, "1", "n1", "a", "b"))
	answer("n1", false)
	send(deltaResponse(t, listenerType, "2", "n2", "a"))
	answer("n2", false)
	exported := r.held.export()
	send(deltaResponse(t, listenerType, "3", "n3", "a", "c"))
	answer("n3", true)
	send(deltaResponse(t, listenerType, "4", "n4", "c"))
	send(deltaResponse(t, listenerType, "5", "n5", "a", "d"))
	answer("n5", false)
	// n3 was NACKed, n4 superseded, n2's a replaced by n5's; b still
	// holds n1's bytes, a and d n5's.
	if b.recycled != 3 {
		t.Errorf("%d responses' bytes recycled, want 3 (n2, n3, n4)", b.recycled)
	}
	send(deltaResponse(t, listenerType, "6", "n6", "b")) // n1's last
	answer("n6", false)
	if b.recycled != 4 {
		t.Errorf("%d responses' bytes recycled, want 4 (and n1)", b.recycled)
	}
	want := func(what string, got []lkgcache.TypeState, versions map[string]string) {
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
	want("handed to the cache after n2", exported, map[string]string{"a": "2", "b": "1"})
	want("held after n6", r.held.export(), map[string]string{"a": "5", "b": "6", "d": "5"})
	if got := r.Names(listenerType); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Errorf("names %v", got)
	}
}

// A delta response that names a resource twice (not what Kuma sends, but
// nothing stops a control plane) must not give its bytes back while the
// holdings still point into them.
func TestADuplicateNameKeepsItsResponsesBytes(t *testing.T) {
	b := newSlabBed(t)
	b.send(deltaResponse(t, listenerType, "1", "n1", "y"))
	b.answer("n1", false)
	b.send(deltaResponse(t, listenerType, "2", "n2", "x", "x", "y"))
	b.answer("n2", false)
	if b.recycled != 1 {
		t.Errorf("%d responses' bytes recycled, want 1 (n1, whose y n2 replaced)", b.recycled)
	}
	b.send(deltaResponse(t, listenerType, "3", "n3", "z")) // takes a pooled slab
	b.answer("n3", false)
	got := b.r.held.export()
	if len(got) != 1 || len(got[0].Resources) != 3 {
		t.Fatalf("held %+v, want x, y and z", got)
	}
	for _, res := range got[0].Resources {
		if !bytes.Equal(res.Body, listener(t, res.Name, 0).GetValue()) {
			t.Errorf("%s's body was overwritten: %x", res.Name, res.Body)
		}
	}
}
