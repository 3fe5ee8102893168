package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// reloadable is a zone whose zoneproxy binary is a copy the test may
// replace, as a package upgrade does.
func reloadable(t *testing.T) *harness.Zone {
	t.Helper()
	zone := harness.NewZone(t, bins, "payments")
	zone.Bins.Zoneproxy = copyBinary(t, bins.Zoneproxy, filepath.Join(zone.Dir, "bin", "zoneproxy"))
	return zone
}

func copyBinary(t *testing.T, from, to string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	// A new file in place of the old, as a package manager installs one.
	tmp := to + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
	return to
}

// reloadStatus is what /status says of generations and reloads.
type reloadStatus struct {
	Phase           string
	Detail          string
	Generation      int
	EnvoyGeneration int
	Envoy           *struct{ PID int }
	Reload          *struct{ Result, Error string }
}

func reloadStatusOf(t *testing.T, p harness.Proxy) reloadStatus {
	t.Helper()
	code, body := tryGet("http://127.0.0.1:" + strconv.Itoa(p.Readiness) + "/status")
	var st reloadStatus
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("/status: %d %q: %v", code, body, err)
	}
	return st
}

func reloadCommand(t *testing.T, zone *harness.Zone, p harness.Proxy) (int, string) {
	t.Helper()
	return harness.Run(t, bins.Zoneproxy, nil, "reload", "--work-dir", p.WorkDir, "--readiness-port", strconv.Itoa(p.Readiness))
}

// watcher polls something during a reload and keeps what went wrong.
type watcher struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	failed []string
	n      int
}

func watch(every time.Duration, probe func() error) *watcher {
	w := &watcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			err := probe()
			w.mu.Lock()
			w.n++
			if err != nil {
				w.failed = append(w.failed, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *watcher) finish() (int, []string) {
	close(w.stop)
	<-w.done
	return w.n, w.failed
}

// readyProbe fails unless /ready answers 200 READY.
func readyProbe(p harness.Proxy) func() error {
	c := &http.Client{Timeout: 5 * time.Second}
	url := "http://127.0.0.1:" + strconv.Itoa(p.Readiness) + "/ready"
	return func() error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return &probeError{resp.StatusCode, string(b)}
		}
		return nil
	}
}

type probeError struct {
	code int
	body string
}

func (e *probeError) Error() string { return strconv.Itoa(e.code) + " " + e.body }

// A reload replaces the agent in place: the agent's and Envoy's PIDs stay,
// /ready answers READY throughout, a connection held through the zone
// listener stays open, new ones are accepted throughout, kuma-cp sees the
// agent's stream come back with the Dataplane gone for at most a second,
// and /status, /ready and the metrics show the new generation.
func TestReloadKeepsEnvoyAndEveryConnection(t *testing.T) {
	t.Parallel()
	for _, role := range []string{"egress", "ingress"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			reloadKeepsEverything(t, role)
		})
	}
}

func reloadKeepsEverything(t *testing.T, role string) {
	zone := reloadable(t)
	p := zone.NewProxy("payments", role)
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	awaitCached(t, p)
	dp := onlyDataplane(t, zone)
	node := dp.Mesh + "." + dp.Name
	envoyPID := agent.EnvoyPID(promptly)
	held := zone.HoldConnection(p, role)
	before := zone.CP.NodeStream(node)

	ready := watch(10*time.Millisecond, readyProbe(p))
	port := p.Egress
	if role == "ingress" {
		port = p.Ingress
	}
	zoneListener := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	clients := watch(10*time.Millisecond, func() error {
		c, err := harness.DialTLSHello(zoneListener, controlplane.DestinationSNI("payments", role))
		if err == nil {
			c.Close()
		}
		return err
	})
	started := time.Now()
	code, out := reloadCommand(t, zone, p)
	took := time.Since(started)
	if code != 0 || !strings.Contains(out, "generation 2 READY") {
		t.Fatalf("zoneproxy reload: exit %d, want 0 with generation 2 READY\n%s", code, out)
	}
	// It names the Envoy it took over, never "no Envoy yet" beside it.
	if !strings.Contains(out, "(Envoy pid "+strconv.Itoa(envoyPID)+",") || strings.Contains(out, "no Envoy yet") {
		t.Fatalf("zoneproxy reload does not name the Envoy it took over (pid %d):\n%s", envoyPID, out)
	}
	t.Logf("reload → the new agent serving: %s", took.Round(time.Millisecond))
	// From the old program's last line to the new relay serving Envoy: the
	// time Envoy's ADS has no answer.
	harness.Eventually(t, promptly, "the new relay to serve Envoy", func() bool {
		return strings.Contains(agent.Output(), "serving Envoy its last-known-good configuration")
	})
	// The new relay listens once the new program supervises Envoy; Envoy
	// reconnects after its own retry back-off (jittered, up to 500 ms).
	if up, ok := between(agent.Output(), "reloading: replacing the agent in place", "supervising the running Envoy"); ok {
		t.Logf("exec → the new program supervising Envoy, its relay serving: %s", up.Round(time.Millisecond))
	}
	if gap, ok := between(agent.Output(), "reloading: replacing the agent in place", "serving Envoy its last-known-good configuration"); ok {
		t.Logf("exec → Envoy's ADS answered by the new relay: %s", gap.Round(time.Millisecond))
	}
	// Live again on a stream kuma-cp accepts after it let go of the old one.
	harness.Eventually(t, promptly, "the live configuration after the reload", func() bool {
		c, body := readinessBody(t, p)
		return c == 200 && !strings.Contains(body, "cached") && zone.CP.NodeStream(node).Accepted > before.Accepted
	})
	probes, notReady := ready.finish()
	dials, refusedDials := clients.finish()
	if len(notReady) > 0 {
		t.Errorf("/ready was not 200 READY %d times of %d during the reload: %v", len(notReady), probes, notReady)
	}
	if len(refusedDials) > 0 {
		t.Errorf("%d of %d new connections failed during the reload: %v", len(refusedDials), dials, refusedDials)
	}
	if agent.Exited() || agent.EnvoyPID(promptly) != envoyPID || harness.ProcessGone(envoyPID) {
		t.Fatalf("the reload changed the agent or Envoy (Envoy pid %d, was %d)", agent.EnvoyPID(promptly), envoyPID)
	}
	if !stillOpen(held) {
		t.Error("the reload cut a connection held through the zone listener")
	}
	st := reloadStatusOf(t, p)
	if st.Generation != 2 || st.EnvoyGeneration != 1 || st.Envoy == nil || st.Envoy.PID != envoyPID || st.Reload == nil || st.Reload.Result != "ok" {
		t.Fatalf("/status after the reload: %+v", st)
	}
	if _, body := readinessBody(t, p); !strings.Contains(body, "agent generation 2, Envoy generation 1") {
		t.Errorf("/ready does not name the generations: %q", body)
	}
	m := agentMetrics(t, p.Readiness)
	for _, want := range []string{`zoneproxy_reloads_total{result="ok"} 1`, `zoneproxy_generation{process="agent"} 2`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	after := zone.CP.NodeStream(node)
	if got := after.Accepted - before.Accepted; got != 1 {
		t.Errorf("kuma-cp accepted %d streams of this node since the reload, want the resumed one", got)
	}
	for _, g := range controlplane.DataplaneGaps(zone.CP.DataplaneTimeline(dp.Mesh, dp.Name), started, time.Now()) {
		t.Logf("Dataplane gap %s", g.Duration().Round(time.Millisecond))
		if g.Duration() > time.Second {
			t.Errorf("kuma-cp had no Dataplane for %s (from %s)", g.Duration(), g.From.Format(time.RFC3339Nano))
		}
	}

	// A second reload works as the first: the new program's main thread
	// forked nothing, yet Envoy survives it.
	if code, out := reloadCommand(t, zone, p); code != 0 || !strings.Contains(out, "generation 3") {
		t.Fatalf("second reload: exit %d\n%s", code, out)
	}
	if harness.ProcessGone(envoyPID) || agent.EnvoyPID(promptly) != envoyPID {
		t.Fatal("the second reload ended Envoy")
	}
	if m := agentMetrics(t, p.Readiness); !strings.Contains(m, `zoneproxy_reloads_total{result="ok"} 2`) {
		t.Error("the count of reloads did not go on across the reload")
	}
	// Envoy still dies with its agent.
	kill(t, agent)
}

// A new binary that cannot run, or a configuration it refuses, never costs
// Envoy: the reload is refused with the reason, the old agent serves on,
// and the refusal is counted.
func TestReloadIsRefusedWhenTheNewProgramCannotTakeOver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, zone *harness.Zone, config string)
		says   string
		exit   int // 75 refused on purpose; 69 only a restart brings the new program in
	}{
		{"a broken binary", func(t *testing.T, zone *harness.Zone, _ string) {
			writeFile(t, zone.Bins.Zoneproxy, "#!/bin/sh\necho 'cannot start: broken build' >&2\nexit 1\n", 0o755)
		}, "cannot start: broken build", 75},
		{"a missing binary", func(t *testing.T, zone *harness.Zone, _ string) {
			if err := os.Remove(zone.Bins.Zoneproxy); err != nil {
				t.Fatal(err)
			}
		}, "no such file or directory", 75},
		{"a configuration the new binary refuses", func(t *testing.T, _ *harness.Zone, config string) {
			writeFile(t, config, "drain-min: lots\n", 0o600)
		}, "drain-min", 75},
		{"a configuration that changes the proxy's identity", func(t *testing.T, _ *harness.Zone, config string) {
			writeFile(t, config, "drain-min: 1s\nlabel:\n  - team=payments\nconcurrency: 3\n", 0o600)
		}, "changes the proxy's identity or where its xDS goes, which the running Envoy was started with (--label); restart to apply it", 75},
		{"a program that cannot say what it takes over", func(t *testing.T, zone *harness.Zone, _ string) {
			writeFile(t, zone.Bins.Zoneproxy, "#!/bin/sh\necho 'zoneproxy 0.1'\n", 0o755)
		}, "is it an older zoneproxy?", 69},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zone, p, config, agent := readyWithConfigFile(t)
			envoyPID := agent.EnvoyPID(promptly)
			held := zone.HoldConnection(p, "egress")

			tc.break_(t, zone, config)
			code, out := reloadCommand(t, zone, p)
			if code != tc.exit || !strings.Contains(out, "goes on serving") || !strings.Contains(out, tc.says) {
				t.Fatalf("zoneproxy reload: exit %d, want %d saying why (%q)\n%s", code, tc.exit, tc.says, out)
			}
			if agent.Exited() || harness.ProcessGone(envoyPID) || !stillOpen(held) {
				t.Fatal("a refused reload cost the agent, Envoy or a connection")
			}
			if c, body := readinessBody(t, p); c != 200 {
				t.Fatalf("/ready %d %q after a refused reload", c, body)
			}
			st := reloadStatusOf(t, p)
			if st.Generation != 1 || st.Reload == nil || st.Reload.Result != "refused" || !strings.Contains(st.Reload.Error, tc.says) {
				t.Fatalf("/status after a refused reload: %+v", st)
			}
			if m := agentMetrics(t, p.Readiness); !strings.Contains(m, `zoneproxy_reloads_total{result="refused"} 1`) {
				t.Error("the refusal is not counted")
			}
			agent.AwaitLog("reload refused; this agent goes on serving", promptly)
		})
	}
}

// readyWithConfigFile is a READY zone egress of a replaceable binary,
// started with a configuration file the test may change.
func readyWithConfigFile(t *testing.T, extra ...string) (*harness.Zone, harness.Proxy, string, *harness.Agent) {
	t.Helper()
	zone := reloadable(t)
	p := zone.NewProxy("payments", "egress")
	config := filepath.Join(zone.Dir, "zoneproxy.yaml")
	writeFile(t, config, "drain-min: 1s\n", 0o600)
	agent := zone.Start(p, nil, append([]string{"--config", config}, extra...)...)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	agent.AwaitLog(egressRegisteredLog, promptly) // a first start's registration as Ready
	return zone, p, config, agent
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A reload while draining for maintenance is refused, and says how to go
// on; the drain is left as it was.
func TestReloadDuringADrainIsRefused(t *testing.T) {
	t.Parallel()
	zone := reloadable(t)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil, "--drain-min", "0s")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if code, out := maintain(t, p, "drain"); code != 0 {
		t.Fatalf("zoneproxy drain: exit %d\n%s", code, out)
	}
	code, out := reloadCommand(t, zone, p)
	if code != 75 || !strings.Contains(out, "undrain") {
		t.Fatalf("zoneproxy reload while drained: exit %d, want 75 (refused on purpose) naming undrain\n%s", code, out)
	}
	if c, word := harness.Readiness(p.Readiness); c != 503 || word != "DRAINED" {
		t.Fatalf("/ready %d %s after the refused reload, want 503 DRAINED", c, word)
	}
	if st := reloadStatusOf(t, p); st.Generation != 1 {
		t.Fatalf("/status %+v", st)
	}
}

// While waiting for the mesh no Envoy runs yet: the new program starts
// over, and goes on to serve once the mesh exists, in the same process.
func TestReloadWhileWaitingForTheMeshStartsOver(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins) // no mesh yet
	zone.Bins.Zoneproxy = copyBinary(t, bins.Zoneproxy, filepath.Join(zone.Dir, "bin", "zoneproxy"))
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", promptly)
	code, out := reloadCommand(t, zone, p)
	if code != 0 || !strings.Contains(out, "generation 2") || !strings.Contains(out, "no Envoy yet") {
		t.Fatalf("zoneproxy reload while waiting for the mesh: exit %d\n%s", code, out)
	}
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", promptly)
	zone.CP.CreateMesh("payments")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if agent.Exited() {
		t.Fatal("the agent's process ended")
	}
	if st := reloadStatusOf(t, p); st.Generation != 2 || st.EnvoyGeneration != 1 || st.Envoy == nil {
		t.Fatalf("/status %+v", st)
	}
}

// While the control plane is away (refusing connections) Envoy is
// served the cache; a reload then
// serves it the cache again at once and goes back to the control plane
// once it answers, on the same Envoy.
func TestReloadWhileServingTheCache(t *testing.T) {
	t.Parallel()
	zone := reloadable(t)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	awaitCached(t, p)
	agent = restartDuringOutage(t, zone, p, agent, "the outage")
	envoyPID := agent.EnvoyPID(promptly)
	ready := watch(10*time.Millisecond, readyProbe(p))
	code, out := reloadCommand(t, zone, p)
	if code != 0 || !strings.Contains(out, "generation 2 READY") {
		t.Fatalf("zoneproxy reload while serving the cache: exit %d\n%s", code, out)
	}
	harness.Eventually(t, promptly, "the cache to serve the reloaded agent's Envoy", func() bool {
		c, body := readinessBody(t, p)
		return c == 200 && strings.Contains(body, "cached")
	})
	zone.CP.SetFaults(controlplane.Faults{})
	harness.Eventually(t, promptly, "the live configuration", func() bool {
		c, body := readinessBody(t, p)
		return c == 200 && !strings.Contains(body, "cached")
	})
	if n, notReady := ready.finish(); len(notReady) > 0 {
		t.Errorf("/ready was not 200 %d times of %d: %v", len(notReady), n, notReady)
	}
	if harness.ProcessGone(envoyPID) || agent.EnvoyPID(promptly) != envoyPID {
		t.Fatal("Envoy was restarted")
	}
}

// Under systemd (INVOCATION_ID set) SIGHUP is a reload; elsewhere it
// stays a stop (signals_test.go and stop_test.go).
func TestSIGHUPUnderSystemdReloads(t *testing.T) {
	t.Parallel()
	skipIfHangUpIgnored(t)
	zone := reloadable(t)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, []string{"INVOCATION_ID=0123456789abcdef"})
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	envoyPID := agent.EnvoyPID(promptly)
	agent.Signal(syscall.SIGHUP)
	harness.Eventually(t, promptly, "generation 2", func() bool { return reloadStatusOf(t, p).Generation == 2 })
	if agent.Exited() || harness.ProcessGone(envoyPID) {
		t.Fatal("SIGHUP under systemd stopped the agent or Envoy")
	}
}

// between is the time from the first log line containing from to the
// first later one containing to, read from the lines' timestamps.
func between(log, from, to string) (time.Duration, bool) {
	var start time.Time
	for _, line := range strings.Split(log, "\n") {
		ts, err := time.Parse(time.RFC3339Nano, strings.SplitN(line, "\t", 2)[0])
		switch {
		case err != nil:
		case start.IsZero() && strings.Contains(line, from):
			start = ts
		case !start.IsZero() && strings.Contains(line, to):
			return ts.Sub(start), true
		}
	}
	return 0, false
}

// Without a cache to serve (no state dir) the new relay resumes the
// control plane's stream for the running Envoy, which keeps its
// configuration meanwhile; in direct mode Envoy's own stream never passes
// through the agent and stays. Either way Envoy and its connections stay.
func TestReloadWithoutTheCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		extra     []string
		newStream bool // the agent's relay opens kuma-cp's stream anew
	}{
		{"relay without a state dir", []string{"--state-dir", ""}, true},
		{"direct mode", []string{"--xds-relay=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zone := reloadable(t)
			p := zone.NewProxy("payments", "egress")
			agent := zone.Start(p, nil, tc.extra...)
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			envoyPID := agent.EnvoyPID(promptly)
			held := zone.HoldConnection(p, "egress")
			dp := onlyDataplane(t, zone)
			node := dp.Mesh + "." + dp.Name
			before := zone.CP.NodeStream(node)
			ready := watch(10*time.Millisecond, readyProbe(p))
			if code, out := reloadCommand(t, zone, p); code != 0 || !strings.Contains(out, "generation 2 READY") {
				t.Fatalf("zoneproxy reload: exit %d\n%s", code, out)
			}
			if tc.newStream {
				harness.Eventually(t, promptly, "kuma-cp to accept the new relay's stream", func() bool {
					return zone.CP.NodeStream(node).Accepted == before.Accepted+1
				})
			} else if now := zone.CP.NodeStream(node); now.Accepted != before.Accepted || now.ActiveStream != before.ActiveStream {
				t.Fatalf("Envoy's own stream changed: %+v, was %+v", now, before)
			}
			if n, notReady := ready.finish(); len(notReady) > 0 {
				t.Errorf("/ready was not 200 %d times of %d: %v", len(notReady), n, notReady)
			}
			if harness.ProcessGone(envoyPID) || agent.EnvoyPID(promptly) != envoyPID || !stillOpen(held) {
				t.Fatal("the reload cost Envoy or a connection")
			}
		})
	}
}

// The access-log FIFO and the MeshMetric socket are handed over: after a
// reload Envoy's access-log lines still reach the backend through the
// same FIFO (never replaced, so Envoy keeps writing it), and a scrape
// through Envoy's MeshMetric listener is still answered.
func TestReloadKeepsTheAccessLogAndMeshMetric(t *testing.T) {
	t.Parallel()
	zone := reloadable(t)
	const name = "zp-rl"
	snk := newSink(t, "127.0.0.1:0")
	if err := zone.CP.SetMeshAccessLog("payments", name, "zp-logs", controlplane.MeshAccessLog{Backends: []controlplane.AccessLogBackend{
		{Type: "Tcp", TCP: &controlplane.TCPAccessLogBackend{Address: snk.addr()}},
	}}); err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	if err := zone.CP.SetMeshMetric("payments", name, "zp-metrics", controlplane.MeshMetric{
		Backends: []controlplane.MetricsBackend{{Type: "Prometheus", Prometheus: &controlplane.PrometheusBackend{Port: uint32(port)}}},
	}); err != nil {
		t.Fatal(err)
	}
	p, agent := namedProxy(t, zone, "payments", "egress", name)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	// Handed over, not made anew: the same files, so nothing Envoy
	// writes or scrapes meanwhile is refused.
	files := []string{kumasock.AccessLog(p.WorkDir, name, "payments"), kumasock.MetricsHijacker(p.WorkDir, name, "payments")}
	var before []os.FileInfo
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, fi)
	}
	connect(t, zone, p, "egress")
	harness.Eventually(t, promptly, "a line at the TCP backend", func() bool { return len(snk.got()) >= 1 })
	lines := len(snk.got())

	if code, out := reloadCommand(t, zone, p); code != 0 {
		t.Fatalf("zoneproxy reload: exit %d\n%s", code, out)
	}
	for i, f := range files {
		if after, err := os.Stat(f); err != nil || !os.SameFile(before[i], after) {
			t.Fatalf("%s was made anew by the reload (%v)", f, err)
		}
	}
	connect(t, zone, p, "egress")
	harness.Eventually(t, promptly, "a line at the backend after the reload", func() bool { return len(snk.got()) > lines })
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	harness.Eventually(t, promptly, "a scrape through Envoy's MeshMetric listener after the reload", func() bool {
		code, b := tryGet(url)
		return code == 200 && strings.Contains(b, "zoneproxy_build_info")
	})
}

// A reload during a stop's drain is refused: the stop goes on to its end.
func TestReloadDuringAStopIsRefused(t *testing.T) {
	t.Parallel()
	zone := reloadable(t)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil, "--drain-time", "20s", "--drain-min", "20s")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	agent.Signal(syscall.SIGTERM)
	agent.AwaitReadiness(p.Readiness, 503, "TERMINATING", promptly)
	code, out := reloadCommand(t, zone, p)
	if code != 75 || !strings.Contains(out, "the agent is stopping") {
		t.Fatalf("zoneproxy reload during a stop: exit %d, want 75 (refused on purpose) saying it stops\n%s", code, out)
	}
	agent.Signal(syscall.SIGTERM) // the second skips the rest of the drain
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d after a refused reload during the stop", code)
	}
}

// A stop that comes right after a reload, before the new program has seen
// the adopted Envoy LIVE, drains Envoy as any stop does: it served all
// along.
func TestStopRightAfterAReloadDrains(t *testing.T) {
	t.Parallel()
	zone := reloadable(t)
	p := zone.NewProxy("payments", "ingress")
	agent := zone.Start(p, nil, "--drain-time", "2s", "--drain-min", "1s")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reloadCommand(t, zone, p)
	}()
	agent.AwaitLog("reloaded: taking over the running Envoy", promptly)
	agent.Signal(syscall.SIGTERM)
	<-reloaded
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d after a stop right after a reload", code)
	}
	if out := agent.Output(); !strings.Contains(out, "draining Envoy") || strings.Contains(out, "stopped before Envoy was ready") {
		t.Errorf("the stop right after the reload did not drain the adopted Envoy:\n%s", out)
	}
}
