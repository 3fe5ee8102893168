package xdsrelay

import (
	"time"

	"go.uber.org/zap"
)

// observerWait bounds how long a session's observer waits for the one
// before it.
const observerWait = 5 * time.Second

// note is one message for a session's observer: a request of Envoy's, a
// response from the control plane as received, or one from the cache.
type note struct {
	req    *request
	resp   *heldFrame
	cached []byte
}

// observeAll observes a session's messages on a goroutine of its own, in
// the order the relay passed them on, so forwarding never waits for it: a
// response is noted before it is sent to Envoy and its ACK after Envoy
// sent that, so the observer sees every response before its ACK.
//
// It starts once the previous session's observer is done (prev), or after
// observerWait: a session that outlived its stream must not hold up the
// next one's configuration for long.
func (s *session) observeAll(prev <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if prev != nil {
		t := time.NewTimer(observerWait)
		select {
		case <-prev:
		case <-t.C:
			s.r.log.Debug("the previous xDS stream's observer is still busy; observing this one meanwhile")
		}
		t.Stop()
	}
	for n := range s.notes {
		switch {
		case n.req != nil:
			s.d.observeRequest(s.obs, n.req)
		case n.resp != nil:
			// Bytes of its own: what Envoy ACKs is kept, aliasing them,
			// after grpc reuses its buffers.
			sl := newSlab(n.resp.buf.Len())
			n.resp.buf.CopyTo(sl.b)
			n.resp.free()
			s.observeResponse(sl.b, sl, false)
		default:
			s.observeResponse(n.cached, nil, true)
		}
	}
}

func (s *session) observeResponse(b []byte, sl *slab, fromCache bool) {
	if err := s.obs.response(s.d, b, sl, fromCache); err != nil {
		s.r.log.Debug("an xDS response could not be decoded; forwarded anyway", zap.Error(err), zap.Bool("cached", fromCache))
	}
}
