// Package metrics keeps the agent's own counters and serves them, followed
// by Envoy's, in Prometheus text format. Hand-written to keep the agent lean.
package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// Metrics is safe for concurrent use; a nil *Metrics records nothing.
type Metrics struct {
	mu         sync.Mutex
	attempts   map[string]uint64
	meshWait   time.Duration
	envoyUp    bool
	envoyExits uint64
	listeners  map[string]bool
	sources    []func(io.Writer)
	tracker    *state.Tracker
	envoyStats func(ctx context.Context) (string, error)
}

// New observes tracker for the ready and phase gauges.
func New(tracker *state.Tracker) *Metrics {
	return &Metrics{attempts: map[string]uint64{}, tracker: tracker}
}

// BootstrapAttempt counts one /bootstrap attempt by outcome
// (success, mesh_not_found, retryable, permanent).
func (m *Metrics) BootstrapAttempt(outcome string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.attempts[outcome]++
	m.mu.Unlock()
}

// WaitedForMesh adds time spent waiting for the mesh to exist.
func (m *Metrics) WaitedForMesh(d time.Duration) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.meshWait += d
	m.mu.Unlock()
}

// ZoneListener records whether Envoy has the zone listener name.
func (m *Metrics) ZoneListener(name string, present bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.listeners == nil {
		m.listeners = map[string]bool{}
	}
	m.listeners[name] = present
	m.mu.Unlock()
}

// EnvoyStarted records a running Envoy and where to read its stats.
func (m *Metrics) EnvoyStarted(stats func(ctx context.Context) (string, error)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.envoyUp, m.envoyStats = true, stats
	m.mu.Unlock()
}

// EnvoyExited records that Envoy is gone.
func (m *Metrics) EnvoyExited() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.envoyUp = false
	m.envoyExits++
	m.envoyStats = nil
	m.mu.Unlock()
}

// AddSource adds a component's own metrics (the access-log streamer, the
// dynconf poller, …) to every page the agent serves.
func (m *Metrics) AddSource(write func(io.Writer)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.sources = append(m.sources, write)
	m.mu.Unlock()
}

// WriteAgent writes the agent's metrics, its components' included, without
// Envoy's: what the MeshMetric hijacker appends to a scrape.
func (m *Metrics) WriteAgent(w io.Writer) {
	if m == nil {
		return
	}
	m.write(w)
	m.mu.Lock()
	sources := slices.Clone(m.sources)
	m.mu.Unlock()
	for _, src := range sources {
		src(w)
	}
}

// EnvoyStatsTimeout bounds the wait for Envoy's /stats/prometheus in a
// scrape: Envoy's admin answers within milliseconds when it is well, and a
// hung Envoy must not hold every scrape (and the scraper's timeout) up.
var EnvoyStatsTimeout = time.Second

// ServeHTTP writes the agent's metrics, its process and Go runtime
// metrics, then Envoy's /stats/prometheus: not asked for while Envoy's
// admin API does not answer the prober (the state's verdict), and given up
// after EnvoyStatsTimeout.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.WriteAgent(w)
	WriteProcess(w)
	WriteGo(w)
	m.mu.Lock()
	stats := m.envoyStats
	m.mu.Unlock()
	if stats == nil {
		return
	}
	if why, down := m.tracker.Current().EnvoyUnreachable(); down {
		fmt.Fprintf(w, "# Envoy stats unavailable: %s\n", oneLine(why))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), EnvoyStatsTimeout)
	defer cancel()
	body, err := stats(ctx)
	if err != nil {
		fmt.Fprintf(w, "# Envoy stats unavailable: %s\n", oneLine(err.Error()))
		return
	}
	io.WriteString(w, body)
}

// oneLine keeps a comment on its line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func (m *Metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.tracker.Current().Verdict() // what /ready and STATUS= say too
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
	}
	fmt.Fprintf(w, "# HELP zoneproxy_build_info Build of the agent.\n# TYPE zoneproxy_build_info gauge\nzoneproxy_build_info{version=\"%s\",commit=\"%s\"} 1\n", LabelValue(version.Version), LabelValue(version.Commit))

	fmt.Fprint(w, "# HELP zoneproxy_bootstrap_attempts_total Bootstrap requests by outcome.\n# TYPE zoneproxy_bootstrap_attempts_total counter\n")
	outcomes := []string{"success", "mesh_not_found", "retryable", "permanent"}
	for k := range m.attempts {
		if !slices.Contains(outcomes, k) {
			outcomes = append(outcomes, k)
		}
	}
	sort.Strings(outcomes)
	for _, o := range outcomes {
		fmt.Fprintf(w, "zoneproxy_bootstrap_attempts_total{outcome=\"%s\"} %d\n", LabelValue(o), m.attempts[o])
	}
	fmt.Fprintf(w, "# HELP zoneproxy_mesh_wait_seconds_total Time spent waiting for the mesh to exist.\n# TYPE zoneproxy_mesh_wait_seconds_total counter\nzoneproxy_mesh_wait_seconds_total %g\n", m.meshWait.Seconds())
	gauge("zoneproxy_envoy_up", "1 while Envoy runs.", b2f(m.envoyUp))
	fmt.Fprintf(w, "# HELP zoneproxy_envoy_exits_total Times Envoy exited.\n# TYPE zoneproxy_envoy_exits_total counter\nzoneproxy_envoy_exits_total %d\n", m.envoyExits)
	gauge("zoneproxy_ready", "1 while /ready answers 200 READY.", b2f(v.Ready))
	fmt.Fprint(w, "# HELP zoneproxy_phase The agent's lifecycle phase, as /ready's first word: ENVOY_UNREACHABLE or ENVOY_<state> while Envoy is not LIVE in READY.\n# TYPE zoneproxy_phase gauge\n")
	fmt.Fprintf(w, "zoneproxy_phase{phase=\"%s\"} 1\n", LabelValue(v.Word))
	if len(m.listeners) > 0 {
		fmt.Fprint(w, "# HELP zoneproxy_zone_listener_present 1 while Envoy has the zone listener the proxy is configured for.\n# TYPE zoneproxy_zone_listener_present gauge\n")
		names := make([]string, 0, len(m.listeners))
		for n := range m.listeners {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "zoneproxy_zone_listener_present{listener=\"%s\"} %g\n", LabelValue(n), b2f(m.listeners[n]))
		}
	}
}

// LabelValue escapes a Prometheus label value as the text format requires:
// backslash, double quote and newline.
func LabelValue(v string) string { return labelEscaper.Replace(v) }

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
