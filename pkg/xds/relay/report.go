package relay

import (
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// report logs an upstream failure, counts it and tells the agent; it
// returns how the relay goes on. attempt and next describe the relay's own
// retry, if it makes one (next 0 for none).
func (r *Relay) report(kind streamKind, err error, attempt int, next time.Duration) StreamError {
	se := classify(err)
	if next > 0 {
		se.Attempt, se.Next = attempt, next
	}
	if !kind.exclusive() {
		// HDS fails with ADS; ADS says it once.
		r.log.Debug("the control plane ended the health-check stream", zap.Stringer("code", se.Code), zap.String("message", se.Message))
		return se
	}
	if se.Held {
		r.reportHeld(se)
		return se
	}
	if se.TooLarge {
		r.reportTooLarge(kind, se)
		return se
	}
	if se.Unserved {
		r.reportUnserved(kind, se)
		return se
	}
	if !se.Local {
		r.met.streamError(se.Code.String())
		state := Refused
		if se.Unreachable {
			state = Unreachable
		}
		r.setUpstream(state)
	}
	r.mu.Lock()
	r.lastErr = &se
	// A long outage retries every few seconds: one warning a minute,
	// with the count left out. A refusal is always said.
	quiet, held := false, 0
	if se.Unreachable {
		var ok bool
		ok, held = r.unreachableWarn.Allow(time.Now())
		quiet = !ok
	}
	r.mu.Unlock()
	if quiet {
		if f := r.opts.Events.StreamError; f != nil {
			f(se)
		}
		return se
	}
	fields := []zap.Field{zap.String("stream", kind.name()), zap.Stringer("code", se.Code), zap.String("message", se.Message),
		zap.Bool("unreachable", se.Unreachable)}
	r.log.Warn("xDS stream to the control plane failed", withRetryFields(fields, se, held)...)
	if f := r.opts.Events.StreamError; f != nil {
		f(se)
	}
	return se
}

// withRetryFields adds the relay's own retry and the count of warnings
// left out to a failure's log fields.
func withRetryFields(fields []zap.Field, se StreamError, suppressed int) []zap.Field {
	if se.Next > 0 {
		fields = append(fields, zap.Int("attempt", se.Attempt), zap.Duration("next", se.Next.Round(time.Millisecond)))
	}
	if suppressed > 0 {
		fields = append(fields, zap.Int("suppressed", suppressed))
	}
	return fields
}

// reportHeld handles kuma-cp's "already an active stream": expected
// after a restart, so said once at info; a warning only once it has gone
// on longer than any deregistration delay.
func (r *Relay) reportHeld(se StreamError) {
	r.met.held()
	now := r.opts.Now()
	r.mu.Lock()
	r.lastErr = &se
	if r.heldSince.IsZero() {
		r.heldSince = now
	}
	since := r.heldSince
	first := r.upstream.State != Held && r.upstream.State != AnotherProxy
	long := heldLong(since, now) && r.upstream.State != AnotherProxy
	r.mu.Unlock()
	switch {
	case long:
		r.setUpstream(AnotherProxy)
		r.log.Warn("another proxy holds this name's stream: kuma-cp has refused every stream of this proxy for longer than any deregistration delay; check that no other zone proxy runs with this "+config.KeyName.Flag(),
			zap.Duration("refused for", now.Sub(since).Round(time.Second)), zap.String("message", se.Message))
	case first:
		r.setUpstream(Held)
		r.log.Info("kuma-cp still holds the stream of this proxy's previous run (expected after a restart): it refuses new ones until its deregistration delay is over; asking again every few hundred milliseconds",
			zap.String("message", se.Message))
	}
	if f := r.opts.Events.StreamError; f != nil {
		f(se)
	}
}

// setUpstream records what the control plane makes of the proxy now.
func (r *Relay) setUpstream(state UpstreamState) {
	r.mu.Lock()
	if r.upstream.State == state {
		r.mu.Unlock()
		return
	}
	if state != Held && state != AnotherProxy {
		r.heldSince = time.Time{}
	}
	r.upstream = Upstream{State: state, Since: r.opts.Now()}
	u := r.upstream
	r.mu.Unlock()
	if f := r.opts.Events.Upstream; f != nil {
		f(u)
	}
}

// usableCache is the snapshot Envoy may be served now, nil if none; why
// Envoy would be served it. Why not is said once per reason: the relay
// asks every few hundred milliseconds while kuma-cp holds the stream.
func (r *Relay) usableCache(why StreamError) *lkgcache.Snapshot {
	if r.opts.Cache == nil {
		return nil
	}
	s, err := r.opts.Cache.Usable()
	if err != nil {
		msg := "the control plane is unreachable and the cached configuration cannot be used"
		if why.Held {
			msg = "kuma-cp still holds this proxy's previous stream and the cached configuration cannot be served meanwhile"
		}
		if why.TooLarge {
			msg = "the control plane's response is over the relay's size bound and the cached configuration cannot be used"
		}
		r.mu.Lock()
		said := r.cacheRefusal == msg+err.Error()
		r.cacheRefusal = msg + err.Error()
		r.mu.Unlock()
		if !said {
			r.log.Warn(msg, zap.String("reason", err.Error()))
		}
		return nil
	}
	return s
}

func (r *Relay) useCache(s *lkgcache.Snapshot, why StreamError) {
	r.cacheEvents.Lock() // events leave in the order the state changed
	defer r.cacheEvents.Unlock()
	r.mu.Lock()
	changed := !r.cache.InUse || r.cache.Held != why.Held
	if changed {
		since := r.opts.Now()
		if r.cache.InUse {
			since = r.cache.Since
		}
		r.cache = CacheState{InUse: true, Held: why.Held, Since: since, WrittenAt: s.WrittenAt}
	}
	st := r.cache
	r.mu.Unlock()
	if changed {
		msg := "the control plane is unreachable; serving Envoy its last-known-good configuration"
		switch {
		case why.Held && why.Message == reregisterWords:
			msg = "registering the Dataplane anew: kuma-cp holds its previous stream until its deregistration delay is over; Envoy keeps its configuration, answered from the cache until kuma-cp accepts the new stream"
		case why.Held:
			// Expected after a restart: not an error.
			msg = "kuma-cp still holds this proxy's previous stream (a restart); serving Envoy its last-known-good configuration until it accepts the new one"
		}
		if why.TooLarge {
			msg = "the control plane's response is over the relay's size bound; serving Envoy its last-known-good configuration"
		}
		if why.Unserved {
			msg = "the control plane does not serve the ADS protocol Envoy speaks; serving Envoy its last-known-good configuration"
		}
		r.log.Info(msg, zap.Time("confirmed", s.WrittenAt), zap.Duration("age", s.Age(st.Since).Round(1e9)))
		if f := r.opts.Events.CachedConfig; f != nil {
			f(st)
		}
	}
}

func (r *Relay) leaveCache() {
	r.cacheEvents.Lock()
	defer r.cacheEvents.Unlock()
	r.mu.Lock()
	changed := r.cache.InUse
	r.cache = CacheState{}
	r.mu.Unlock()
	if changed {
		r.log.Info("Envoy runs on the control plane's configuration again; the cached one is no longer in use")
		if f := r.opts.Events.CachedConfig; f != nil {
			f(CacheState{})
		}
	}
}
