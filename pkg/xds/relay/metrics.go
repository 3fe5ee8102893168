package relay

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zoneproxy/zoneproxy/pkg/metrics"
)

// relayMetrics counts by label. Its zero value is ready: the counters are
// made on first use.
type relayMetrics struct {
	once         sync.Once
	streamErrors *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	heldStreams  prometheus.Counter
	responses    *prometheus.CounterVec
}

func (m *relayMetrics) init() *relayMetrics {
	m.once.Do(func() {
		m.streamErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zoneproxy_xds_stream_errors_total",
			Help: "xDS streams to the control plane that failed or that it ended with an error, by gRPC code.",
		}, []string{"code"})
		m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zoneproxy_xds_rejected_total",
			Help: "Configurations Envoy rejected (NACK), by resource type.",
		}, []string{"type"})
		m.heldStreams = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "zoneproxy_xds_streams_held_total",
			Help: "Streams kuma-cp refused because it still held this proxy's previous one (after a restart; not counted as errors).",
		})
		m.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zoneproxy_xds_responses_rejected_total",
			Help: "Control-plane responses the relay neither relayed nor cached, by reason (too_large: over its size bound).",
		}, []string{"reason"})
	})
	return m
}

func (m *relayMetrics) held() { m.init().heldStreams.Inc() }

func (m *relayMetrics) responseRejected(reason string) {
	m.init().responses.WithLabelValues(reason).Inc()
}

func (m *relayMetrics) streamError(code string) {
	m.init().streamErrors.WithLabelValues(metrics.LabelValue(code)).Inc()
}

func (m *relayMetrics) rejected(typ string) {
	m.init().rejections.WithLabelValues(metrics.LabelValue(typ)).Inc()
}

// The gauges read from the relay's state at each scrape.
var (
	cachedConfigDesc = prometheus.NewDesc("zoneproxy_xds_cached_config",
		"1 while Envoy runs on the last-known-good configuration from the cache.", nil, nil)
	cachedConfigAgeDesc = prometheus.NewDesc("zoneproxy_xds_cached_config_age_seconds",
		"Age of the cached configuration Envoy runs on (0 when it runs on the control plane's).", nil, nil)
	upstreamDesc = prometheus.NewDesc("zoneproxy_xds_upstream",
		"What the control plane is expected to make of this proxy, from its streams: 1 for the current state.", []string{"state"}, nil)
)

// Metrics returns the relay's metrics, for the agent's registry
// (metrics.Metrics.Register).
func (r *Relay) Metrics() prometheus.Collector { return relayCollector{r} }

type relayCollector struct{ r *Relay }

func (c relayCollector) Describe(ch chan<- *prometheus.Desc) {
	m := c.r.met.init()
	m.streamErrors.Describe(ch)
	m.rejections.Describe(ch)
	m.heldStreams.Describe(ch)
	m.responses.Describe(ch)
	ch <- cachedConfigDesc
	ch <- cachedConfigAgeDesc
	ch <- upstreamDesc
}

func (c relayCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.r.met.init()
	m.streamErrors.Collect(ch)
	m.rejections.Collect(ch)
	m.heldStreams.Collect(ch)
	m.responses.Collect(ch)
	st := c.r.State()
	inUse, age := 0.0, 0.0
	if st.Cache.InUse {
		inUse, age = 1, c.r.opts.Now().Sub(st.Cache.WrittenAt).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(cachedConfigDesc, prometheus.GaugeValue, inUse)
	ch <- prometheus.MustNewConstMetric(cachedConfigAgeDesc, prometheus.GaugeValue, age)
	for _, s := range []UpstreamState{Connected, Held, AnotherProxy, Unreachable, Refused, Withdrawn, Unserved, Unanswered} {
		v := 0.0
		if s == st.Upstream.State {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(upstreamDesc, prometheus.GaugeValue, v, string(s))
	}
}
