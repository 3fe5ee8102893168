package metrics

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// scrape is GET /metrics as curl asks for it: any format, no compression.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4; charset=utf-8") {
		t.Errorf("Content-Type %q is not Prometheus text format 0.0.4", ct)
	}
	if rec.Code != 200 {
		t.Errorf("status %d", rec.Code)
	}
	return rec.Body.String()
}

// parse reads a page as Prometheus does, failing the test if it is not
// valid text format.
func parse(t *testing.T, page string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatalf("the page is not valid Prometheus text: %v\n%s", err, page)
	}
	return fams
}

// A fresh agent's own metrics, whole: names, help, types and every outcome
// at 0, so a dashboard sees each series from the first scrape; the process
// and Go runtime metrics with them.
func TestFreshAgentPage(t *testing.T) {
	want := `# HELP zoneproxy_build_info Build of the agent.
# TYPE zoneproxy_build_info gauge
zoneproxy_build_info{commit="` + version.Commit + `",version="` + version.Version + `"} 1
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
	srv := httptest.NewServer(New(state.NewTracker()))
	defer srv.Close()
	// The page's own zoneproxy_* families are exactly these.
	var agents []string
	for name := range parse(t, want) {
		agents = append(agents, name)
	}
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(want), agents...); err != nil {
		t.Error(err)
	}
	page := parse(t, get(t, srv.URL, nil).body)
	for name := range page {
		if !slices.Contains(agents, name) && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "go_") {
			t.Errorf("%s is on a fresh agent's page", name)
		}
	}
	if page["process_cpu_seconds_total"] == nil || page["go_goroutines"] == nil {
		t.Errorf("the process and Go metrics are not on the page")
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
		// want appear on the page, absent nowhere; envoy ends it (after
		// every agent's metric), "" for nothing of Envoy's.
		want, absent []string
		envoy        string
		statsCalled  bool
	}{
		{"attempts by outcome, with unknown outcomes among them",
			func(m *Metrics, _ *state.Tracker) {
				for _, o := range []string{"success", "retryable", "mesh_not_found", "mesh_not_found", "zz_new", "another", "retryable", "mesh_not_found"} {
					m.BootstrapAttempt(o)
				}
			},
			[]string{
				`zoneproxy_bootstrap_attempts_total{outcome="another"} 1
zoneproxy_bootstrap_attempts_total{outcome="mesh_not_found"} 3
zoneproxy_bootstrap_attempts_total{outcome="permanent"} 0
zoneproxy_bootstrap_attempts_total{outcome="retryable"} 2
zoneproxy_bootstrap_attempts_total{outcome="success"} 1
zoneproxy_bootstrap_attempts_total{outcome="zz_new"} 1
`,
			}, nil, "", false},
		{"mesh wait adds up in seconds",
			func(m *Metrics, _ *state.Tracker) {
				m.WaitedForMesh(time.Second)
				m.WaitedForMesh(1500 * time.Millisecond)
			},
			[]string{"\nzoneproxy_mesh_wait_seconds_total 2.5\n"}, nil, "", false},
		{"the phase gauge follows the tracker",
			func(_ *Metrics, tr *state.Tracker) { tr.Set(state.WaitingForMesh, `waiting for mesh "payments"`) },
			[]string{"\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="WAITING_FOR_MESH"} 1`},
			[]string{`phase="STARTING"`}, "", false},
		{"ready while Envoy runs: Envoy's stats follow the agent's",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
			},
			[]string{"\nzoneproxy_envoy_up 1\n", "\nzoneproxy_ready 1\n", `zoneproxy_phase{phase="READY"} 1` + "\n"},
			[]string{"unavailable"}, envoyStats, true},
		{"Envoy running but draining is not ready",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetDraining("draining (30s left)", time.Now().Add(30*time.Second))
			},
			[]string{"\nzoneproxy_envoy_up 1\n", "\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="TERMINATING"} 1` + "\n"},
			nil, envoyStats, true},
		{"Envoy's stats failing are a comment, not a broken page",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(failing)
				tr.Set(state.Ready, "Envoy ready")
			},
			[]string{`zoneproxy_phase{phase="READY"} 1` + "\n"},
			[]string{"envoy_server_live"}, "# Envoy stats unavailable: dial unix kuma-envoy-admin.sock: connection refused\n", false},
		// A hung Envoy (kill -STOP): /ready says ENVOY_UNREACHABLE, and so
		// does the page, at once, without asking Envoy for its stats.
		{"Envoy's admin API not answering the prober: not ready, and its stats are not asked for",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Err: "no answer within 1s", At: time.Now()})
			},
			[]string{"\nzoneproxy_envoy_up 1\n", "\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="ENVOY_UNREACHABLE"} 1` + "\n"},
			[]string{`phase="READY"`, "envoy_server_live"},
			"# Envoy stats unavailable: Envoy's admin API does not answer /ready: no answer within 1s\n", false},
		{"Envoy answering another state than LIVE: not ready, its stats still shown",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "DRAINING", At: time.Now()})
			},
			[]string{"\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="ENVOY_DRAINING"} 1` + "\n"},
			[]string{`phase="READY"`}, envoyStats, true},
		{"Envoy live again after not answering: ready, with its stats",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				tr.Set(state.Ready, "Envoy ready")
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Err: "no answer within 1s", At: time.Now()})
				tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "LIVE", Live: true, At: time.Now()})
			},
			[]string{"\nzoneproxy_ready 1\n", `zoneproxy_phase{phase="READY"} 1` + "\n"},
			[]string{"unavailable"}, envoyStats, true},
		{"after Envoy exits, its stats are no longer asked for",
			func(m *Metrics, tr *state.Tracker) {
				m.EnvoyStarted(stats)
				m.EnvoyExited()
				tr.Set(state.Failed, "Envoy exited")
			},
			[]string{"\nzoneproxy_envoy_up 0\n", "\nzoneproxy_envoy_exits_total 1\n", "\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="FAILED"} 1` + "\n"},
			[]string{"envoy_server_live", "unavailable"}, "", false},
		{"restarts count every exit",
			func(m *Metrics, _ *state.Tracker) {
				for range 3 {
					m.EnvoyStarted(stats)
					m.EnvoyExited()
				}
			},
			[]string{"\nzoneproxy_envoy_exits_total 3\n"}, nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			statsCalled = false
			tr := state.NewTracker()
			m := New(tr)
			tc.record(m, tr)
			page := scrape(t, m)
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("%q missing in:\n%s", w, page)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(page, a) {
					t.Errorf("%q should not be on the page:\n%s", a, page)
				}
			}
			if tc.envoy != "" {
				// After every agent's metric: the page ends with it.
				if !strings.HasSuffix(page, "\n"+tc.envoy) {
					t.Errorf("the page does not end with %q:\n%s", tc.envoy, page)
				}
			} else if strings.Contains(page, "envoy_server_live") || strings.Contains(page, "# Envoy") {
				t.Errorf("Envoy's part on the page:\n%s", page)
			}
			parse(t, page)
			if statsCalled != tc.statsCalled {
				t.Errorf("Envoy's stats asked for: %v, want %v", statsCalled, tc.statsCalled)
			}
		})
	}
}

// The agent's code calls these unconditionally; a nil *Metrics is the
// "no metrics" configuration and must not panic.
func TestNilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	component := prometheus.NewCounter(prometheus.CounterOpts{Name: "zoneproxy_x_total", Help: "x"})
	calls := map[string]func(){
		"BootstrapAttempt": func() { m.BootstrapAttempt("success") },
		"WaitedForMesh":    func() { m.WaitedForMesh(time.Second) },
		"ZoneListener":     func() { m.ZoneListener("self_zoneegress_dp_ze-port", true) },
		"EnvoyStarted":     func() { m.EnvoyStarted(func(context.Context) (string, error) { return "", nil }) },
		"EnvoyExited":      func() { m.EnvoyExited() },
		"Register":         func() { m.Register(component) },
		"WriteAgent":       func() { m.WriteAgent(io.Discard) },
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

// A component's metrics, registered, are on /metrics and in what the
// MeshMetric hijacker appends (which has neither the process and Go
// metrics nor Envoy's); registered again (the agent run again in one
// process), the new one replaces the old. Zone listener presence is a
// labelled gauge with escaped values.
func TestComponentsAndZoneListeners(t *testing.T) {
	m := New(state.NewTracker())
	m.EnvoyStarted(func(context.Context) (string, error) { return envoyStats, nil })
	component := func(v float64) prometheus.Collector {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "zoneproxy_accesslog_lines_read_total", Help: "Lines read from the access-log FIFO."})
		c.Add(v)
		return c
	}
	m.Register(component(7))
	m.Register(component(3))
	m.ZoneListener("self_zoneegress_dp_ze-port", false)
	m.ZoneListener(`odd"name\with`+"\nnewline", true)
	var b strings.Builder
	m.WriteAgent(&b)
	agent := b.String()
	for _, want := range []string{
		"# TYPE zoneproxy_accesslog_lines_read_total counter\nzoneproxy_accesslog_lines_read_total 3\n",
		`zoneproxy_zone_listener_present{listener="self_zoneegress_dp_ze-port"} 0`,
		`zoneproxy_zone_listener_present{listener="odd\"name\\with\nnewline"} 1`,
	} {
		if !strings.Contains(agent, want) {
			t.Errorf("the hijacker's part lacks %q:\n%s", want, agent)
		}
	}
	for name := range parse(t, agent) {
		if !strings.HasPrefix(name, "zoneproxy_") {
			t.Errorf("the hijacker's part has %s", name)
		}
	}
	if strings.Contains(agent, "envoy_server_live") {
		t.Errorf("the hijacker's part has Envoy's stats:\n%s", agent)
	}
	page := scrape(t, m)
	if fams := parse(t, page); len(fams["zoneproxy_accesslog_lines_read_total"].GetMetric()) != 1 {
		t.Errorf("/metrics lacks the component's metrics, or has them twice:\n%s", page)
	}
	if !strings.Contains(page, "\nzoneproxy_accesslog_lines_read_total 3\n") {
		t.Errorf("/metrics does not show the component registered last:\n%s", page)
	}
}

// A component whose metrics clash with others' is a programming error.
func TestRegisterRefusesClashingMetrics(t *testing.T) {
	m := New(state.NewTracker())
	defer func() {
		if recover() == nil {
			t.Error("a second zoneproxy_ready was registered")
		}
	}()
	m.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "zoneproxy_ready", Help: "another"}))
}

type response struct {
	header http.Header
	body   string
}

// get is GET url with the request headers given, the body decompressed
// only if the answer says gzip.
func get(t *testing.T, url string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// Go's client would ask for gzip and decompress behind our back.
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	body := io.Reader(resp.Body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if body, err = gzip.NewReader(resp.Body); err != nil {
			t.Fatalf("not gzip: %v", err)
		}
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.Header, string(b)}
}

// What Prometheus 2 and 3 send.
const (
	prometheus2Accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
	prometheus3Accept = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
	protobufAccept    = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3"
)

// The format a scraper asks for, and gzip if it takes it: any while the
// page is the agent's alone; Prometheus text while Envoy's page follows,
// which no other format can carry as it is.
func TestFormatAndCompression(t *testing.T) {
	tr := state.NewTracker()
	tr.Set(state.Ready, "Envoy ready")
	alone := httptest.NewServer(New(tr))
	defer alone.Close()
	withEnvoy := New(tr)
	withEnvoy.EnvoyStarted(func(context.Context) (string, error) { return envoyStats, nil })
	envoy := httptest.NewServer(withEnvoy)
	defer envoy.Close()
	unreachable := state.NewTracker()
	unreachable.Set(state.Ready, "Envoy ready")
	unreachable.SetEnvoy(state.EnvoyHealth{Probed: true, Err: "no answer within 1s", At: time.Now()})
	hung := New(unreachable)
	hung.EnvoyStarted(func(context.Context) (string, error) { return envoyStats, nil })
	hungSrv := httptest.NewServer(hung)
	defer hungSrv.Close()

	const text = "text/plain; version=0.0.4; charset=utf-8"
	for _, tc := range []struct {
		name, url, accept, encoding string
		wantType                    string // Content-Type's start
		wantGzip                    bool
		wantEnd                     string // how the body ends
	}{
		{"curl, Envoy not running", alone.URL, "", "", text, false, "\nzoneproxy_ready 1\n"},
		{"Prometheus 2, Envoy not running: OpenMetrics", alone.URL, prometheus2Accept, "gzip", "application/openmetrics-text; version=1.0.0", true, "\n# EOF\n"},
		{"Prometheus 3, Envoy not running: OpenMetrics", alone.URL, prometheus3Accept, "gzip", "application/openmetrics-text; version=1.0.0", true, "\n# EOF\n"},
		{"protobuf, Envoy not running", alone.URL, protobufAccept, "", "application/vnd.google.protobuf", false, ""},
		{"curl, Envoy running", envoy.URL, "", "", text, false, "\n" + envoyStats},
		{"curl --compressed, Envoy running", envoy.URL, "", "gzip, deflate, br, zstd", text, true, "\n" + envoyStats},
		{"Prometheus 2, Envoy running: text, gzip", envoy.URL, prometheus2Accept, "gzip", text, true, "\n" + envoyStats},
		{"Prometheus 3, Envoy running: text, gzip", envoy.URL, prometheus3Accept, "gzip", text, true, "\n" + envoyStats},
		{"protobuf, Envoy running: text", envoy.URL, protobufAccept, "", text, false, "\n" + envoyStats},
		{"gzip refused, Envoy running", envoy.URL, prometheus3Accept, "gzip;q=0, *", text, false, "\n" + envoyStats},
		{"any encoding, Envoy running", envoy.URL, "", "*", text, true, "\n" + envoyStats},
		{"Prometheus 3, Envoy hung: text with the comment", hungSrv.URL, prometheus3Accept, "gzip", text, true,
			"\n# Envoy stats unavailable: Envoy's admin API does not answer /ready: no answer within 1s\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := get(t, tc.url, map[string]string{"Accept": tc.accept, "Accept-Encoding": tc.encoding})
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
				t.Errorf("Content-Type %q, want %q", ct, tc.wantType)
			}
			if gz := r.header.Get("Content-Encoding") == "gzip"; gz != tc.wantGzip {
				t.Errorf("gzip %v, want %v", gz, tc.wantGzip)
			}
			if vary := r.header.Values("Vary"); !slices.Contains(vary, "Accept") || !slices.Contains(vary, "Accept-Encoding") {
				t.Errorf("Vary %q, want Accept and Accept-Encoding", vary)
			}
			if !strings.HasSuffix(r.body, tc.wantEnd) {
				t.Errorf("the page does not end with %q:\n%s", tc.wantEnd, r.body)
			}
			switch {
			case strings.HasPrefix(tc.wantType, "text/plain"):
				fams := parse(t, r.body)
				if fams["zoneproxy_ready"] == nil || fams["go_gc_duration_seconds"] == nil {
					t.Errorf("the agent's metrics are not all there:\n%s", r.body)
				}
			case strings.HasPrefix(tc.wantType, "application/openmetrics-text"):
				// OpenMetrics names a counter's family without _total.
				if !strings.Contains(r.body, "# TYPE zoneproxy_envoy_exits counter\nzoneproxy_envoy_exits_total 0") {
					t.Errorf("not OpenMetrics:\n%s", r.body)
				}
			default:
				dec := expfmt.NewDecoder(strings.NewReader(r.body), expfmt.NewFormat(expfmt.TypeProtoDelim))
				names := map[string]bool{}
				for {
					var f dto.MetricFamily
					if err := dec.Decode(&f); err == io.EOF {
						break
					} else if err != nil {
						t.Fatalf("not delimited protobuf: %v", err)
					}
					names[f.GetName()] = true
				}
				if !names["zoneproxy_ready"] || !names["go_goroutines"] {
					t.Errorf("families %v lack the agent's", names)
				}
			}
		})
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
