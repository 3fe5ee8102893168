package relay

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// Envoy resets its stream and opens a new one at once: the old stream's
// last messages (an ACK of y) are observed before the new stream's (y
// removed), or the relay's view of Envoy, and the cache after it, would
// keep y.
func TestANewStreamIsObservedAfterTheOldOne(t *testing.T) {
	r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(t).caPEM}, Token: staticToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*session, chan struct{}) {
		s := &session{r: r, kind: delta{}, obs: newObserver(r), toObserver: make(chan observedMessage, 16)}
		done := make(chan struct{})
		go s.observeAll(r.observeAfter(done), done)
		return s, done
	}
	req := func(m *discoveryv3.DeltaDiscoveryRequest) observedMessage {
		q, err := delta{}.readRequest(mustMarshal(t, m))
		if err != nil {
			t.Fatal(err)
		}
		return observedMessage{req: q}
	}

	a, aDone := start()
	a.toObserver <- req(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType})
	a.toObserver <- observedMessage{cached: mustMarshal(t, deltaResponse(t, listenerType, "1", "n1", "y"))}

	b, bDone := start()
	b.toObserver <- req(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, InitialResourceVersions: map[string]string{"y": "1"}})
	b.toObserver <- observedMessage{cached: mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: listenerType, SystemVersionInfo: "2", Nonce: "n2", RemovedResources: []string{"y"}})}
	b.toObserver <- req(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n2"})
	close(b.toObserver)

	// The old stream's ACK, sent by Envoy before its reset, reaches the
	// old observer last.
	a.toObserver <- req(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n1"})
	close(a.toObserver)
	<-aDone
	<-bDone
	if got := r.Names(listenerType); len(got) != 0 {
		t.Errorf("holds %v after the new stream removed y", got)
	}
}
