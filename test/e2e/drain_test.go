package e2e

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

const maintenanceDrainTime = 3 * time.Second

// maintain runs `zoneproxy drain` or `undrain` for p to completion.
func maintain(t *testing.T, p harness.Proxy, what string) (int, string) {
	t.Helper()
	return harness.Run(t, bins.Zoneproxy, nil, what, "--work-dir", p.WorkDir,
		"--readiness-port", strconv.Itoa(p.Readiness), "--drain-time", maintenanceDrainTime.String())
}

// stillOpen reports whether the client side of c has not been closed by
// the proxy: a read times out rather than ending.
func stillOpen(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func agentMetrics(t *testing.T, port int) string {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// drain → out of rotation with Envoy and the agent running; undrain → a
// new Envoy serves again; SIGUSR2 drains; a stop while drained is clean.
func TestDrainUndrainAndStopWhileDrained(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil, "--drain-time", maintenanceDrainTime.String(), "--drain-min", "1s")
	egress := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Egress))
	held := zone.HoldConnection(p, "egress")
	envoyPID := agent.EnvoyPID(promptly)

	start := time.Now()
	code, out := maintain(t, p, "drain")
	took := time.Since(start)
	if code != 0 || !strings.Contains(out, "DRAINED") {
		t.Fatalf("zoneproxy drain: exit %d, want 0 with DRAINED\n%s", code, out)
	}
	// The open connection kept the drain going to its end, and was not cut.
	if took < maintenanceDrainTime {
		t.Fatalf("drained after %s with a connection open, before the drain time %s", took, maintenanceDrainTime)
	}
	if !stillOpen(held) {
		t.Fatal("the drain cut an open connection")
	}
	if code, word := harness.Readiness(p.Readiness); code != 503 || word != "DRAINED" {
		t.Fatalf("/ready %d %s, want 503 DRAINED", code, word)
	}
	if code, body, err := harness.EnvoyAdmin(p.WorkDir, http.MethodGet, "/ready"); err != nil || code != 503 || body != "DRAINING" {
		t.Fatalf("Envoy's /ready %d %q (%v): its health checks should fail", code, body, err)
	}
	if !refused(egress) {
		t.Fatal("the drained zone listener still accepts connections")
	}
	if agent.Exited() || harness.ProcessGone(envoyPID) {
		t.Fatal("the drain stopped the agent or Envoy")
	}
	if m := agentMetrics(t, p.Readiness); !strings.Contains(m, `zoneproxy_phase{phase="DRAINED"} 1`) {
		t.Fatalf("no DRAINED phase in the metrics:\n%s", m)
	}
	// The listener check does not turn a drained proxy back to READY.
	time.Sleep(2 * time.Second)
	if code, word := harness.Readiness(p.Readiness); code != 503 || word != "DRAINED" {
		t.Fatalf("/ready %d %s while drained, want 503 DRAINED", code, word)
	}
	held.Close()

	code, out = maintain(t, p, "undrain")
	if code != 0 || !strings.Contains(out, "READY") {
		t.Fatalf("zoneproxy undrain: exit %d, want 0 with READY\n%s", code, out)
	}
	if code, word := harness.Readiness(p.Readiness); code != 200 || word != "READY" {
		t.Fatalf("/ready %d %s after the undrain", code, word)
	}
	harness.Eventually(t, promptly, "the drained Envoy to be replaced", func() bool { return harness.ProcessGone(envoyPID) })
	zone.HoldConnection(p, "egress") // the listener accepts again
	if strings.Contains(agent.Output(), "exited unexpectedly") {
		t.Fatalf("the undrain's restart was taken for a crash\n%s", agent.Output())
	}
	envoyPID = agent.EnvoyPID(promptly)

	agent.Signal(syscall.SIGUSR2)
	agent.AwaitReadiness(p.Readiness, 503, "DRAINED", promptly)
	agent.AwaitLog("SIGUSR2: draining for maintenance", promptly)

	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("stop while drained: exit %d, want 0\n%s", code, agent.Output())
	}
	assertNothingLeft(t, agent, envoyPID, p.WorkDir)
}

func TestDrainWithoutARunningInstanceExits1(t *testing.T) {
	t.Parallel()
	dir := harness.ShortTempDir(t)
	code, out := harness.Run(t, bins.Zoneproxy, nil, "drain", "--work-dir", dir)
	if code != 1 || !strings.Contains(out, "no running zoneproxy for this configuration") {
		t.Fatalf("exit %d, want 1 saying no instance runs\n%s", code, out)
	}
}

// Before Envoy serves there is nothing to drain: refused, retryable.
func TestDrainBeforeReadyIsRefused(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins) // no mesh: the agent waits for it
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", promptly)
	code, out := maintain(t, p, "drain")
	if code != 1 || !strings.Contains(out, "not serving yet") || !strings.Contains(out, "WAITING_FOR_MESH") {
		t.Fatalf("exit %d, want 1 saying it is not serving yet\n%s", code, out)
	}
	if agent.Exited() {
		t.Fatal("the refused drain stopped the agent")
	}
}
