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
	"testing"
	"time"

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
	zone := reloadable(t)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	awaitCached(t, p)
	dp := onlyDataplane(t, zone)
	node := dp.Mesh + "." + dp.Name
	envoyPID := agent.EnvoyPID(promptly)
	held := zone.HoldConnection(p, "egress")
	before := zone.CP.NodeStream(node)

	ready := watch(10*time.Millisecond, readyProbe(p))
	egress := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Egress))
	clients := watch(10*time.Millisecond, func() error {
		c, err := harness.DialTLSHello(egress, controlplane.DestinationSNI("payments", "egress"))
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
	t.Logf("reload → the new agent serving: %s", took.Round(time.Millisecond))
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
	// Envoy still dies with its agent.
	kill(t, agent)
}
