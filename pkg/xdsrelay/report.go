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
	if !se.Local {
		r.met.streamError(se.Code.String())
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

// usableCache is the snapshot Envoy may be served now, nil if none.
func (r *Relay) usableCache() *lkgcache.Snapshot {
	if r.opts.Cache == nil {
		return nil
	}
	s, err := r.opts.Cache.Usable()
	if err != nil {
		r.log.Warn("the control plane is unreachable and the cached configuration cannot be used", zap.String("reason", err.Error()))
		return nil
	}
	return s
}

func (r *Relay) useCache(s *lkgcache.Snapshot) {
	r.cacheEvents.Lock() // events leave in the order the state changed
	defer r.cacheEvents.Unlock()
	r.mu.Lock()
	changed := !r.cache.InUse
	if changed {
		r.cache = CacheState{InUse: true, Since: r.opts.Now(), WrittenAt: s.WrittenAt}
	}
	st := r.cache
	r.mu.Unlock()
	if changed {
		r.log.Warn("the control plane is unreachable; serving Envoy its last-known-good configuration",
			zap.Time("confirmed", s.WrittenAt), zap.Duration("age", s.Age(st.Since).Round(1e9)))
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
	errs, rej := sorted(r.met.streamErrors), sorted(r.met.rejections)
	r.met.mu.Unlock()
	fmt.Fprint(w, "# HELP zoneproxy_xds_stream_errors_total xDS streams to the control plane that failed or that it ended with an error, by gRPC code.\n# TYPE zoneproxy_xds_stream_errors_total counter\n")
	for _, kv := range errs {
		fmt.Fprintf(w, "zoneproxy_xds_stream_errors_total{code=\"%s\"} %d\n", metrics.LabelValue(kv.k), kv.v)
	}
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
