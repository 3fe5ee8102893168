package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q is not Prometheus text format 0.0.4", ct)
	}
	return rec.Body.String()
}

// A fresh agent's own metrics, whole: names, help, types and every outcome
// at 0, so a dashboard sees each series from the first scrape. The process
// and Go runtime metrics follow them.
func TestFreshAgentPage(t *testing.T) {
	want := `# HELP zoneproxy_build_info Build of the agent.
# TYPE zoneproxy_build_info gauge
zoneproxy_build_info{version="` + version.Version + `",commit="` + version.Commit + `"} 1
# HELP zoneproxy_bootstrap_attempts_total Bootstrap requests by outcome.
# TYPE zoneproxy_bootstrap_attempts_total counter
zoneproxy_bootstrap_attempts_total{outcome="mesh_not_found"} 0
zoneproxy_bootstrap_attempts_total{outcome="permanent"} 0
zoneproxy_bootstrap_attempts_total{outcome="retryable"} 0
zoneproxy_bootstrap_attempts_total{outcome="success"} 0
# HELP zoneproxy_mesh_wait_seconds_total Time spent waiting for the mesh to exist.
# TYPE zoneproxy_mesh_wait_seconds_total counter
zoneproxy_mesh_wait_seconds_total 0
# HELP zoneproxy_envoy_up 1 while Envoy runs.
# TYPE zoneproxy_envoy_up gauge
zoneproxy_envoy_up 0
# HELP zoneproxy_envoy_exits_total Times Envoy exited.
# TYPE zoneproxy_envoy_exits_total counter
zoneproxy_envoy_exits_total 0
# HELP zoneproxy_ready 1 while /ready answers 200 READY.
# TYPE zoneproxy_ready gauge
zoneproxy_ready 0
# HELP zoneproxy_phase The agent's lifecycle phase, as /ready's first word: ENVOY_UNREACHABLE or ENVOY_<state> while Envoy is not LIVE in READY.
# TYPE zoneproxy_phase gauge
zoneproxy_phase{phase="STARTING"} 1
`
	got := scrape(t, New(state.NewTracker()))
	if !strings.HasPrefix(got, want) {
		t.Fatalf("got:\n%s\nwant first:\n%s", got, want)
	}
	if rest := got[len(want):]; !strings.HasPrefix(rest, "# HELP process_") {
		t.Errorf("the process metrics do not follow the agent's:\n%s", rest)
	}
}

const envoyStats = "# TYPE envoy_server_live gauge\nenvoy_server_live 1\n"

func TestPage(t *testing.T) {
	statsCalled := false
	stats := func(ctx context.Context) (string, error) {
		statsCalled = true
		if _, ok := ctx.Deadline(); !ok {
			return "", errors.New("called without a deadline")
		}
		return envoyStats, nil
	}
	failing := func(context.Context) (string, error) {
		return "", errors.New("dial unix kuma-envoy-admin.sock: connection refused")
	}
	cases := []struct {
		name   string
		record func(m *Metrics, tr *state.Tracker)
		// want appear in this order; absent appear nowhere.
		want, absent []string
		statsCalled  bool
	}{
		{"attempts by outcome, in a stable order with unknown outcomes among them",
			func(m *Metrics, _ *state.Tracker) {
				for _, o := range []string{"success", "retryable", "mesh_not_found", "mesh_not_found", "zz_new", "another", "retryable", "mesh_not_found"} {
					m.BootstrapAttempt(o)
				}
			},
			[]string{
				`zoneproxy_bootstrap_attempts_total{outcome="another"} 1`,
				`zoneproxy_bootstrap_attempts_total{outcome="mesh_not_found"} 3`,
				`zoneproxy_bootstrap_attempts_total{outcome="permanent"} 0`,
				`zoneproxy_bootstrap_attempts_total{outcome="retryable"} 2`,
				`zoneproxy_bootstrap_attempts_total{outcome="success"} 1`,
				`zoneproxy_bootstrap_attempts_total{outcome="zz_new"} 1`,
			}, nil, false},
		{"mesh wait adds up in seconds",
			func(m *Metrics, _ *state.Tracker) {
				m.WaitedForMesh(time.Second)
				m.WaitedForMesh(1500 * time.Millisecond)
			},
			[]string{"\nzoneproxy_mesh_wait_seconds_total 2.5\n"}, nil, false},
		{"the phase gauge follows the tracker",
			func(_ *Metrics, tr *state.Tracker) { tr.Set(state.WaitingForMesh, `waiting for mesh "payments"`) },
			[]string{"\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="WAITING_FOR_MESH"} 1`},
			[]string{`phase="STARTING"`}, false},
		{"ready while Envoy runs: Envoy's stats follow the agent's",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
			},
			[]string{"\nzoneproxy_envoy_up 1\n", "\nzoneproxy_ready 1\n", `zoneproxy_phase{phase="READY"} 1` + "\n", "\n" + envoyStats},
			[]string{"unavailable"}, true},
		{"Envoy running but draining is not ready",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetDraining("draining (30s left)", time.Now().Add(30*time.Second))
			},
			[]string{"\nzoneproxy_envoy_up 1\n", "\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="TERMINATING"} 1` + "\n", "\n" + envoyStats},
			nil, true},
		{"Envoy's stats failing are a comment, not a broken page",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(failing)
				tr.Set(state.Ready, "Envoy ready")
			},
			[]string{`zoneproxy_phase{phase="READY"} 1` + "\n", "\n# Envoy stats unavailable: dial unix kuma-envoy-admin.sock: connection refused\n"},
			[]string{"envoy_server_live"}, false},
		// A hung Envoy (kill -STOP): /ready says ENVOY_UNREACHABLE, and so
		// does the page, at once, without asking Envoy for its stats.
		{"Envoy's admin API not answering the prober: not ready, and its stats are not asked for",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Err: "no answer within 1s", At: time.Now()})
			},
			[]string{"\nzoneproxy_envoy_up 1\n", "\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="ENVOY_UNREACHABLE"} 1` + "\n",
				"\n# Envoy stats unavailable: Envoy's admin API does not answer /ready: no answer within 1s\n"},
			[]string{`phase="READY"`, "envoy_server_live"}, false},
		{"Envoy answering another state than LIVE: not ready, its stats still shown",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "DRAINING", At: time.Now()})
			},
			[]string{"\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="ENVOY_DRAINING"} 1` + "\n", "\n" + envoyStats},
			[]string{`phase="READY"`}, true},
		{"Envoy live again after not answering: ready, with its stats",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Err: "no answer within 1s", At: time.Now()})
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "LIVE", Live: true, At: time.Now()})
			},
			[]string{"\nzoneproxy_ready 1\n", `zoneproxy_phase{phase="READY"} 1` + "\n", "\n" + envoyStats},
			[]string{"unavailable"}, true},
		{"after Envoy exits, its stats are no longer asked for",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				m.EnvoyExited()
				tr.Set(state.Failed, "Envoy exited")
			},
			[]string{"\nzoneproxy_envoy_up 0\n", "\nzoneproxy_envoy_exits_total 1\n", "\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="FAILED"} 1` + "\n"},
			[]string{"envoy_server_live", "unavailable"}, false},
		{"restarts count every exit",
			func(m *Metrics, _ *state.Tracker) {
				for range 3 {
					m.EnvoyStarted(stats)
					m.EnvoyExited()
				}
			},
			[]string{"\nzoneproxy_envoy_exits_total 3\n"}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			statsCalled = false
			tr := state.NewTracker()
			m := New(tr)
			tc.record(m, tr)
			page := scrape(t, m)
			rest := page
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%q missing or out of order in:\n%s", w, page)
				}
				rest = rest[i+len(w):]
			}
			for _, a := range tc.absent {
				if strings.Contains(page, a) {
					t.Errorf("%q should not be on the page:\n%s", a, page)
				}
			}
			if statsCalled != tc.statsCalled {
				t.Errorf("Envoy's stats asked for: %v, want %v", statsCalled, tc.statsCalled)
			}
			if !strings.HasSuffix(page, "\n") {
				t.Errorf("the page does not end with a newline:\n%s", page)
			}
		})
	}
}

// The agent's code calls these unconditionally; a nil *Metrics is the
// "no metrics" configuration and must not panic.
func TestNilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	calls := map[string]func(){
		"BootstrapAttempt": func() { m.BootstrapAttempt("success") },
		"WaitedForMesh":    func() { m.WaitedForMesh(time.Second) },
		"EnvoyStarted":     func() { m.EnvoyStarted(func(context.Context) (string, error) { return "", nil }) },
		"EnvoyExited":      func() { m.EnvoyExited() },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panicked: %v", r)
				}
			}()
			call()
		})
	}
}

// Components' metrics follow the agent's on /metrics and in the hijacker's
// page; zone listener presence is a labelled gauge with escaped values.
func TestSourcesAndZoneListeners(t *testing.T) {
	m := New(state.NewTracker())
	m.AddSource(func(w io.Writer) { io.WriteString(w, "zoneproxy_accesslog_lines_read_total 3\n") })
	m.ZoneListener("self_zoneegress_dp_ze-port", false)
	m.ZoneListener(`odd"name\with`+"\nnewline", true)
	var b strings.Builder
	m.WriteAgent(&b)
	page := b.String()
	for _, want := range []string{
		"zoneproxy_accesslog_lines_read_total 3\n",
		`zoneproxy_zone_listener_present{listener="self_zoneegress_dp_ze-port"} 0`,
		`zoneproxy_zone_listener_present{listener="odd\"name\\with\nnewline"} 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if got := scrape(t, m); !strings.Contains(got, "zoneproxy_accesslog_lines_read_total 3") {
		t.Errorf("/metrics lacks the component's metrics:\n%s", got)
	}
}

// A hung Envoy that the prober has not caught yet costs a scrape at most
// EnvoyStatsTimeout, not the scraper's whole timeout.
func TestEnvoyStatsAreWaitedForBriefly(t *testing.T) {
	old := EnvoyStatsTimeout
	EnvoyStatsTimeout = 50 * time.Millisecond
	t.Cleanup(func() { EnvoyStatsTimeout = old })
	tr := state.NewTracker()
	m := New(tr)
	m.EnvoyStarted(func(ctx context.Context) (string, error) {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Minute): // a stopped Envoy never answers
			return envoyStats, nil
		}
	})
	tr.Set(state.Ready, "Envoy ready")
	done := make(chan string, 1)
	start := time.Now()
	go func() { done <- scrape(t, m) }()
	select {
	case page := <-done:
		if took := time.Since(start); took > time.Second {
			t.Errorf("the scrape took %s, want about EnvoyStatsTimeout (%s)", took, EnvoyStatsTimeout)
		}
		if !strings.Contains(page, "\n# Envoy stats unavailable: context deadline exceeded\n") {
			t.Errorf("the page does not say Envoy's stats are unavailable:\n%s", page)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the scrape waits on Envoy's stats for ever")
	}
}
