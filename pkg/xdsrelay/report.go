package xdsrelay

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
)

// report logs an upstream failure, counts it and tells the agent; it
// returns how the relay goes on. attempt and next describe the relay's own
// retry, if it makes one (next 0 for none).
func (r *Relay) report(d dialect, err error, attempt int, next time.Duration) StreamError {
	se := classify(err)
	if next > 0 {
		se.Attempt, se.Next = attempt, next
	}
	if !d.exclusive() {
		// HDS fails with ADS; ADS says it once.
		r.log.Debug("the control plane ended the health-check stream", zap.Stringer("code", se.Code), zap.String("message", se.Message))
		return se
	}
	if se.Held {
		r.reportHeld(se)
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
	fields := []zap.Field{zap.String("stream", d.name()), zap.Stringer("code", se.Code), zap.String("message", se.Message),
		zap.Bool("unreachable", se.Unreachable)}
	if se.Next > 0 {
		fields = append(fields, zap.Int("attempt", se.Attempt), zap.Duration("next", se.Next.Round(time.Millisecond)))
	}
	if held > 0 {
		fields = append(fields, zap.Int("suppressed", held))
	}
	r.log.Warn("xDS stream to the control plane failed", fields...)
	if f := r.opts.Events.StreamError; f != nil {
		f(se)
	}
	return se
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
		r.log.Warn("another proxy holds this name's stream: kuma-cp has refused every stream of this proxy for longer than any deregistration delay; check that no other zone proxy runs with this --name",
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
		if why.Held {
			// Expected after a restart: not an error.
			msg = "kuma-cp still holds this proxy's previous stream (a restart); serving Envoy its last-known-good configuration until it accepts the new one"
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

// relayMetrics counts by label.
type relayMetrics struct {
	mu           sync.Mutex
	streamErrors map[string]uint64
	rejections   map[string]uint64
	heldStreams  uint64
}

func (m *relayMetrics) held() {
	m.mu.Lock()
	m.heldStreams++
	m.mu.Unlock()
}

func (m *relayMetrics) streamError(code string) { m.inc(&m.streamErrors, code) }
func (m *relayMetrics) rejected(typ string)     { m.inc(&m.rejections, typ) }

func (m *relayMetrics) inc(counts *map[string]uint64, label string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if *counts == nil {
		*counts = map[string]uint64{}
	}
	(*counts)[label]++
}

// WriteMetrics writes the relay's metrics in the Prometheus text format.
func (r *Relay) WriteMetrics(w io.Writer) {
	r.met.mu.Lock()
	errs, rej, held := sorted(r.met.streamErrors), sorted(r.met.rejections), r.met.heldStreams
	r.met.mu.Unlock()
	fmt.Fprint(w, "# HELP zoneproxy_xds_stream_errors_total xDS streams to the control plane that failed or that it ended with an error, by gRPC code.\n# TYPE zoneproxy_xds_stream_errors_total counter\n")
	for _, kv := range errs {
		fmt.Fprintf(w, "zoneproxy_xds_stream_errors_total{code=\"%s\"} %d\n", metrics.LabelValue(kv.k), kv.v)
	}
	fmt.Fprintf(w, "# HELP zoneproxy_xds_streams_held_total Streams kuma-cp refused because it still held this proxy's previous one (after a restart; not counted as errors).\n# TYPE zoneproxy_xds_streams_held_total counter\nzoneproxy_xds_streams_held_total %d\n", held)
	fmt.Fprint(w, "# HELP zoneproxy_xds_rejected_total Configurations Envoy rejected (NACK), by resource type.\n# TYPE zoneproxy_xds_rejected_total counter\n")
	for _, kv := range rej {
		fmt.Fprintf(w, "zoneproxy_xds_rejected_total{type=\"%s\"} %d\n", metrics.LabelValue(kv.k), kv.v)
	}
	st := r.State().Cache
	inUse, age := 0, 0.0
	if st.InUse {
		inUse, age = 1, r.opts.Now().Sub(st.WrittenAt).Seconds()
	}
	fmt.Fprintf(w, "# HELP zoneproxy_xds_cached_config 1 while Envoy runs on the last-known-good configuration from the cache.\n# TYPE zoneproxy_xds_cached_config gauge\nzoneproxy_xds_cached_config %d\n", inUse)
	up := r.State().Upstream.State
	fmt.Fprint(w, "# HELP zoneproxy_xds_upstream What the control plane is expected to make of this proxy, from its streams: 1 for the current state.\n# TYPE zoneproxy_xds_upstream gauge\n")
	for _, s := range []UpstreamState{Connected, Held, AnotherProxy, Unreachable, Refused, Withdrawn} {
		v := 0
		if s == up {
			v = 1
		}
		fmt.Fprintf(w, "zoneproxy_xds_upstream{state=\"%s\"} %d\n", s, v)
	}
	fmt.Fprintf(w, "# HELP zoneproxy_xds_cached_config_age_seconds Age of the cached configuration Envoy runs on (0 when it runs on the control plane's).\n# TYPE zoneproxy_xds_cached_config_age_seconds gauge\nzoneproxy_xds_cached_config_age_seconds %g\n", age)
}

type labelCount struct {
	k string
	v uint64
}

func sorted(m map[string]uint64) []labelCount {
	out := make([]labelCount, 0, len(m))
	for k, v := range m {
		out = append(out, labelCount{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].k < out[j].k })
	return out
}
