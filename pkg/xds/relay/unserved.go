package relay

import (
	"time"

	"go.uber.org/zap"
)

// A control plane that answers, but not the ADS protocol Envoy was started
// with, is not unreachable: kuma-cp 3.0 serves delta ADS only, while a
// proxy bootstrapped by 2.14 speaks state of the world. Two shapes are
// seen: the stream is refused as gRPC refuses a method it does not
// register (Unimplemented), or accepted and never answered (kuma-cp
// master registers state of the world without wiring it to anything).
// The relay says which (Unserved, Unanswered) and serves the cache
// meanwhile; the agent asks the control plane for its bootstrap and moves
// Envoy onto it (pkg/upgrade/inplace).

// DefaultUnansweredAfter is how long an accepted stream may go unanswered
// before the relay says so: kuma-cp answers within about a second of
// registering a proxy (its store cache expiration), far less than this.
const DefaultUnansweredAfter = 10 * time.Second

// UnansweredStream is an accepted ADS stream the control plane has not answered.
type UnansweredStream struct {
	Delta bool
	After time.Duration
}

// Protocol names the stream's ADS protocol.
func (u UnansweredStream) Protocol() string { return ProtocolName(u.Delta) }

// ProtocolName names an ADS protocol as messages say it.
func ProtocolName(delta bool) string {
	if delta {
		return "delta"
	}
	return "state-of-the-world"
}

func protocolOf(kind streamKind) string { return ProtocolName(kind.incremental()) }

// watchUnanswered says so when u, an ADS stream, is still unanswered
// after Options.UnansweredAfter.
func (r *Relay) watchUnanswered(kind streamKind, u *upstream) {
	if !kind.exclusive() {
		return
	}
	after := r.opts.UnansweredAfter
	time.AfterFunc(after, func() {
		if u.answered.Load() || u.closed.Load() {
			return
		}
		r.setUpstream(Unanswered)
		r.log.Warn("the control plane accepted this proxy's configuration stream and has not answered it; it may no longer serve the ADS protocol Envoy speaks (kuma-cp 3.0 serves delta only)",
			zap.String("stream", kind.name()), zap.Duration("after", after))
		if f := r.opts.Events.Unanswered; f != nil {
			f(UnansweredStream{Delta: kind.incremental(), After: after})
		}
	})
}

// reportUnserved handles a stream refused as Unimplemented: the control
// plane answers, but not this protocol. Said once per run of refusals.
func (r *Relay) reportUnserved(kind streamKind, se StreamError) {
	r.met.streamError(se.Code.String())
	r.mu.Lock()
	first := r.upstream.State != Unserved
	r.lastErr = &se
	r.mu.Unlock()
	if first {
		r.setUpstream(Unserved)
		r.log.Warn("the control plane does not serve the ADS protocol Envoy speaks: it refused the stream as a method it does not know (kuma-cp 3.0 serves delta ADS only)",
			zap.String("stream", kind.name()), zap.String("protocol", protocolOf(kind)), zap.String("message", se.Message))
	}
	if f := r.opts.Events.StreamError; f != nil {
		f(se)
	}
}
