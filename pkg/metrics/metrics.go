// Package metrics is the agent's Prometheus registry: the agent's own
// metrics, those its components register (Register), and the standard
// process_* and go_* collectors. /metrics serves it with
// prometheus/client_golang's promhttp, and Envoy's /stats/prometheus after
// it while Envoy runs.
package metrics

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// Metrics is safe for concurrent use; a nil *Metrics records nothing.
type Metrics struct {
	reg        *prometheus.Registry
	page       http.Handler // the registry alone, in the format the scraper asks for
	attempts   *prometheus.CounterVec
	meshWait   prometheus.Counter
	envoyUp    prometheus.Gauge
	envoyExits prometheus.Counter
	listeners  *prometheus.GaugeVec
	tracker    *state.Tracker
	id         identity

	mu         sync.Mutex
	envoyStats func(ctx context.Context) (string, error)
}

// New observes tracker for the ready and phase gauges.
func New(tracker *state.Tracker) *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		tracker: tracker,
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zoneproxy_bootstrap_attempts_total", Help: "Bootstrap requests by outcome.",
		}, []string{"outcome"}),
		meshWait: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "zoneproxy_mesh_wait_seconds_total", Help: "Time spent waiting for the mesh to exist.",
		}),
		envoyUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "zoneproxy_envoy_up", Help: "1 while Envoy runs.",
		}),
		envoyExits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "zoneproxy_envoy_exits_total", Help: "Times Envoy exited.",
		}),
		listeners: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "zoneproxy_zone_listener_present", Help: "1 while Envoy has the zone listener the proxy is configured for.",
		}, []string{"listener"}),
	}
	// Every outcome from the first scrape, so a dashboard sees each series.
	for _, o := range []string{"success", "mesh_not_found", "retryable", "permanent"} {
		m.attempts.WithLabelValues(o)
	}
	m.reg.MustRegister(m.attempts, m.meshWait, m.envoyUp, m.envoyExits, m.listeners, verdict{tracker}, &m.id)
	m.reg.MustRegister(runtimeCollectors()...)
	m.page = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A collector that fails (a /proc file unreadable) leaves its
		// series out; the rest is served.
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
	return m
}

// Register adds a component's metrics (the xDS relay, the access-log
// streamer, …) to the registry, so that they are on every page the agent
// serves. A component registered again with the same metrics (the agent run
// again in one process) replaces the earlier one. Metrics that clash with
// others' are a programming error, and panic.
func (m *Metrics) Register(c prometheus.Collector) {
	if m == nil {
		return
	}
	err := m.reg.Register(c)
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		m.reg.Unregister(are.ExistingCollector)
		err = m.reg.Register(c)
	}
	if err != nil {
		panic(err)
	}
}

// BootstrapAttempt counts one /bootstrap attempt by outcome
// (success, mesh_not_found, retryable, permanent).
func (m *Metrics) BootstrapAttempt(outcome string) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(LabelValue(outcome)).Inc()
}

// WaitedForMesh adds time spent waiting for the mesh to exist.
func (m *Metrics) WaitedForMesh(d time.Duration) {
	if m == nil {
		return
	}
	m.meshWait.Add(d.Seconds())
}

// ZoneListener records whether Envoy has the zone listener name.
func (m *Metrics) ZoneListener(name string, present bool) {
	if m == nil {
		return
	}
	m.listeners.WithLabelValues(LabelValue(name)).Set(b2f(present))
}

// EnvoyStarted records a running Envoy and where to read its stats.
func (m *Metrics) EnvoyStarted(stats func(ctx context.Context) (string, error)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.envoyStats = stats
	m.envoyUp.Set(1)
	m.mu.Unlock()
}

// EnvoyExited records that Envoy is gone.
func (m *Metrics) EnvoyExited() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.envoyStats = nil
	m.envoyUp.Set(0)
	m.envoyExits.Inc()
	m.mu.Unlock()
}

// WriteAgent writes the agent's own zoneproxy_* metrics, its components'
// included, in Prometheus text format 0.0.4, without the process and Go
// metrics or Envoy's: what the MeshMetric hijacker appends to a scrape.
func (m *Metrics) WriteAgent(w io.Writer) {
	if m == nil {
		return
	}
	m.writeText(w, func(name string) bool { return strings.HasPrefix(name, "zoneproxy_") })
}

// writeText writes the registry's families that keep admits (all when nil)
// in Prometheus text format 0.0.4. A collector that fails is left out, as
// on the promhttp page.
func (m *Metrics) writeText(w io.Writer, keep func(name string) bool) {
	fams, _ := m.reg.Gather()
	enc := expfmt.NewEncoder(w, expfmt.FmtText)
	for _, f := range fams {
		if keep == nil || keep(f.GetName()) {
			if enc.Encode(f) != nil {
				return // the client went away
			}
		}
	}
}

// EnvoyStatsTimeout bounds the wait for Envoy's /stats/prometheus in a
// scrape: Envoy's admin answers within milliseconds when it is well, and a
// hung Envoy must not hold every scrape (and the scraper's timeout) up.
var EnvoyStatsTimeout = time.Second

// ServeHTTP serves the registry, then, while Envoy runs, Envoy's
// /stats/prometheus: not asked for while Envoy's admin API does not answer
// the prober (the state's verdict), and given up after EnvoyStatsTimeout;
// in both cases a comment line says why.
//
// With nothing of Envoy's to add, promhttp answers: OpenMetrics, protobuf
// or text, as the scraper asks, gzip-compressed if it accepts gzip. Envoy's
// page is Prometheus text format 0.0.4, and neither OpenMetrics (which
// would rename its counters and ends with "# EOF") nor protobuf can carry it
// unparsed; so then the answer is text format 0.0.4 whatever the scraper
// prefers (every scraper accepts it): the registry through expfmt's text
// encoder, Envoy's page after it, gzip-compressed as a whole if accepted.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	envoy, ok := m.envoyText(r.Context())
	if !ok {
		m.page.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", string(expfmt.FmtText))
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	out := io.Writer(w)
	if acceptsGzip(r.Header) {
		h.Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	m.writeText(out, nil)
	io.WriteString(out, envoy)
}

// envoyText is what follows the registry: Envoy's /stats/prometheus, or a
// comment saying why not; nothing (false) while Envoy is not running.
func (m *Metrics) envoyText(ctx context.Context) (string, bool) {
	m.mu.Lock()
	stats := m.envoyStats
	m.mu.Unlock()
	if stats == nil {
		return "", false
	}
	if why, down := m.tracker.Current().EnvoyUnreachable(); down {
		return unavailable(why), true
	}
	ctx, cancel := context.WithTimeout(ctx, EnvoyStatsTimeout)
	defer cancel()
	body, err := stats(ctx)
	if err != nil {
		return unavailable(err.Error()), true
	}
	return body, true
}

// unavailable is the comment line that takes the place of Envoy's stats.
func unavailable(why string) string {
	return "# Envoy stats unavailable: " + strings.ReplaceAll(why, "\n", " ") + "\n"
}

// acceptsGzip reports whether Accept-Encoding takes gzip, by name or by
// "*", with a q above 0.
func acceptsGzip(h http.Header) bool {
	named, star := -1.0, -1.0
	for _, v := range h.Values("Accept-Encoding") {
		for item := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(item, ";")
			q := 1.0
			if s, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
				if f, err := strconv.ParseFloat(s, 64); err == nil {
					q = f
				}
			}
			switch strings.ToLower(strings.TrimSpace(coding)) {
			case "gzip", "x-gzip":
				named = q
			case "*":
				star = q
			}
		}
	}
	if named >= 0 {
		return named > 0
	}
	return star > 0
}

// The gauges that follow the agent's state, read at each scrape: the build,
// and what /ready and STATUS= say.
var (
	buildInfoDesc = prometheus.NewDesc("zoneproxy_build_info", "Build of the agent.", []string{"version", "commit"}, nil)
	readyDesc     = prometheus.NewDesc("zoneproxy_ready", "1 while /ready answers 200 READY.", nil, nil)
	phaseDesc     = prometheus.NewDesc("zoneproxy_phase",
		"The agent's lifecycle phase, as /ready's first word: ENVOY_UNREACHABLE or ENVOY_<state> while Envoy is not LIVE in READY.",
		[]string{"phase"}, nil)
)

type verdict struct{ tracker *state.Tracker }

func (verdict) Describe(ch chan<- *prometheus.Desc) {
	ch <- buildInfoDesc
	ch <- readyDesc
	ch <- phaseDesc
}

func (c verdict) Collect(ch chan<- prometheus.Metric) {
	v := c.tracker.Current().Verdict()
	ch <- prometheus.MustNewConstMetric(buildInfoDesc, prometheus.GaugeValue, 1, LabelValue(version.Version), LabelValue(version.Commit))
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, b2f(v.Ready))
	ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, 1, LabelValue(v.Word))
}

// LabelValue makes v a label value the client library takes: invalid UTF-8
// (which it refuses, and which may come from Envoy's answers or from the
// build) becomes U+FFFD. The text format's escaping is the encoder's.
func LabelValue(v string) string { return strings.ToValidUTF8(v, "\uFFFD") }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
