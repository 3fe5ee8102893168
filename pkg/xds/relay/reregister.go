package relay

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Re-registering: kuma-cp reads the Dataplane only from the node metadata
// of an accepted stream's first request, so registering it anew (a zone
// egress held back as NotReady until Envoy has its listener, then Ready)
// takes a new stream. Envoy's stream stays open: the relay answers it
// from the cache, as after a restart, while kuma-cp holds the old stream
// (its deregistration delay), then carries on on the new one.

// reregisterWords is why the stream is held meanwhile.
const reregisterWords = "registering the Dataplane anew: kuma-cp accepts the new registration once it lets go of this proxy's previous stream (its deregistration delay, 10 s by default)"

// Reregister closes the proxy's stream so that the next one registers the
// Dataplane as Options.AgentMetadata gives it now, and says whether it
// did. Without a stream, or while withdrawn, there is nothing to close:
// the next stream opens so.
func (r *Relay) Reregister() bool {
	r.upMu.Lock()
	defer r.upMu.Unlock()
	if r.active == nil || r.Withdrawn() {
		return false
	}
	r.reregistered.Store(r.active)
	r.active.close()
	r.active = nil
	return true
}

// afterReregister carries Envoy's stream on once the relay closed up for
// a new registration: from the cache while kuma-cp holds the old stream,
// or, with no cache to serve, by ending it as unavailable (Envoy keeps
// its configuration and reconnects, with what it holds).
func (s *session) afterReregister(ctx context.Context) error {
	why := StreamError{Code: codes.Unavailable, Message: reregisterWords, Held: true}
	s.r.setUpstream(Held)
	// The next stream's first answer is the new registration's: Connected.
	s.responded.Store(false)
	if s.kind.cacheable() {
		if snap := s.r.usableCache(why); snap != nil {
			s.early = nil // answered already, by the control plane
			return s.fromCache(ctx, snap, why)
		}
	}
	return status.Error(codes.Unavailable, reregisterWords)
}
