package relay

import (
	"context"
	"maps"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// While Envoy receives and applies a response, the relay leaves it unread:
// reading it beside Envoy would take a core from Envoy. Envoy's answer, or
// the end of the stream, has it read, before the answer.
func TestAResponseIsReadOnceEnvoyAnswersIt(t *testing.T) {
	for _, tc := range []struct {
		name        string
		envoyAnswer bool
		accepted    int
		outstanding int
	}{
		{name: "Envoy ACKs it", envoyAnswer: true, accepted: 1, outstanding: 0},
		{name: "the stream ends first", envoyAnswer: false, accepted: 0, outstanding: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var accepted []Acceptance
			r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(t).caPEM}, Token: staticToken("t"),
				Events: Events{Accepted: func(a Acceptance) { accepted = append(accepted, a) }}})
			if err != nil {
				t.Fatal(err)
			}
			s := &session{r: r, kind: delta{}, obs: newObserver(r), toObserver: make(chan observedMessage)}
			done := make(chan struct{})
			go s.observeAll(nil, done)
			request := func(m *discoveryv3.DeltaDiscoveryRequest) {
				req, err := delta{}.readRequest(mustMarshal(t, m))
				if err != nil {
					t.Fatal(err)
				}
				s.toObserver <- observedMessage{req: req}
			}
			request(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
			resp := mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: listenerType, SystemVersionInfo: "1", Nonce: "n",
				Resources: []*discoveryv3.Resource{{Name: "l", Version: "1", Resource: listener(t, "l", 10)}}})
			s.queued.Add(1)
			s.toObserver <- observedMessage{resp: &receivedFrame{buf: mem.BufferSlice{mem.SliceBuffer(resp)}}}

			// An absence has no event to await: a while in which reading a
			// small response would have finished many times over.
			time.Sleep(100 * time.Millisecond)
			if n := s.observed.Load(); n != 0 {
				t.Fatalf("the response was read while Envoy had not answered it (%d read)", n)
			}

			if tc.envoyAnswer {
				request(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n"})
			}
			close(s.toObserver)
			<-done
			if n := s.observed.Load(); n != 1 {
				t.Errorf("responses read: %d, want 1", n)
			}
			if len(accepted) != tc.accepted {
				t.Errorf("acceptances: %v, want %d", accepted, tc.accepted)
			}
			if n := s.obs.outstanding(); n != tc.outstanding {
				t.Errorf("responses Envoy has not answered: %d, want %d", n, tc.outstanding)
			}
		})
	}
}

// A resumed stream offers the control plane the versions Envoy ACKed,
// even when Envoy's last ACK is still waiting for the observer (busy with
// the previous stream's, or starved of CPU): offering older versions
// than Envoy holds has kuma-cp send everything again.
func TestAResumedStreamWaitsForEnvoysLastACKToBeObserved(t *testing.T) {
	r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(t).caPEM}, Token: staticToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	s := &session{r: r, kind: delta{}, obs: newObserver(r), toObserver: make(chan observedMessage, 16), subs: newSubscriptions()}
	busy := make(chan struct{}) // the previous stream's observer
	done := make(chan struct{})
	go s.observeAll(busy, done)
	s.observe(envoyRequest{raw: mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})})
	resp := mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: listenerType, SystemVersionInfo: "1", Nonce: "n",
		Resources: []*discoveryv3.Resource{{Name: "l", Version: "7", Resource: listener(t, "l", 10)}}})
	s.queued.Add(1)
	s.toObserver <- observedMessage{resp: &receivedFrame{buf: mem.BufferSlice{mem.SliceBuffer(resp)}}}
	s.observe(envoyRequest{raw: mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n"})})

	resumed := make(chan [][]byte, 1)
	go func() { resumed <- s.resumeRequests(context.Background()) }()
	// An absence has no event to await: a while in which taking the
	// snapshot would have finished many times over.
	select {
	case <-resumed:
		t.Fatal("the resumed stream was opened before Envoy's ACK was observed")
	case <-time.After(100 * time.Millisecond):
	}
	close(busy)
	reqs := <-resumed
	if len(reqs) != 1 {
		t.Fatalf("resumed requests: %d, want 1", len(reqs))
	}
	req := decodeDeltaRequest(t, reqs[0])
	if got := req.GetInitialResourceVersions(); !maps.Equal(got, map[string]string{"l": "7"}) {
		t.Fatalf("resumed with versions %v, want what Envoy ACKed", got)
	}
	close(s.toObserver)
	<-done
}

// A control plane back from an outage is offered what Envoy holds, also
// when Envoy's ACK of a cached response is still on its way to the relay:
// offered less, kuma-cp would never remove what Envoy holds and it no
// longer has. A response Envoy leaves unanswered is waited for only a
// while; the wait ends with the stream.
func TestAResumedStreamWaitsForEnvoysAnswerToTheCache(t *testing.T) {
	pki := newPKI(t)
	newSession := func() (*session, func()) {
		r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: pki.caPEM}, Token: staticToken("t")})
		if err != nil {
			t.Fatal(err)
		}
		s := &session{r: r, kind: delta{}, obs: newObserver(r), toObserver: make(chan observedMessage, 16), subs: newSubscriptions()}
		done := make(chan struct{})
		prev := make(chan struct{})
		close(prev)
		go s.observeAll(prev, done)
		s.observe(envoyRequest{raw: mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})})
		cached := mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: listenerType, SystemVersionInfo: "1", Nonce: "zoneproxy-lkg-1",
			Resources: []*discoveryv3.Resource{{Name: "l", Version: "7", Resource: listener(t, "l", 10)}}})
		s.toObserver <- observedMessage{cached: cached}
		return s, func() { close(s.toObserver); <-done }
	}
	ack := envoyRequest{raw: mustMarshal(t, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "zoneproxy-lkg-1"})}

	s, end := newSession()
	resumed := make(chan [][]byte, 1)
	go func() { resumed <- s.resumeRequests(context.Background()) }()
	select {
	case <-resumed:
		t.Fatal("the resumed stream was opened before Envoy answered the cached response")
	case <-time.After(100 * time.Millisecond): // an absence has no event to await
	}
	s.observe(ack)
	reqs := <-resumed
	if len(reqs) != 1 {
		t.Fatalf("resumed requests: %d, want 1", len(reqs))
	}
	if got := decodeDeltaRequest(t, reqs[0]).GetInitialResourceVersions(); !maps.Equal(got, map[string]string{"l": "7"}) {
		t.Fatalf("resumed with versions %v, want what Envoy ACKed", got)
	}
	end()

	defer func(d time.Duration) { cacheAnswerWait = d }(cacheAnswerWait)
	cacheAnswerWait = 50 * time.Millisecond
	s, end = newSession()
	if reqs := s.resumeRequests(context.Background()); len(reqs) != 1 || len(decodeDeltaRequest(t, reqs[0]).GetInitialResourceVersions()) != 0 {
		t.Fatalf("with no answer from Envoy: %d requests (%v), want one offering nothing", len(reqs), decodeDeltaRequest(t, reqs[0]))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if reqs := s.resumeRequests(ctx); reqs != nil {
		t.Fatalf("a stream that ended was resumed with %d requests", len(reqs))
	}
	end()
}
