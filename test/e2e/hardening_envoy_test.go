package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// A hung Envoy (kill -STOP) is not ready anywhere: /ready says
// ENVOY_UNREACHABLE, and the metrics say the same at once, without waiting
// on Envoy's stats; once Envoy runs again (SIGCONT) both say READY.
func TestHardeningHungEnvoyIsNotReadyInTheMetrics(t *testing.T) {
	t.Parallel()
	_, p, agent := readyEgress(t, nil)
	envoy := agent.EnvoyPID(promptly)
	if err := syscall.Kill(envoy, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(envoy, syscall.SIGCONT) })

	agent.AwaitReadiness(p.Readiness, 503, "ENVOY_UNREACHABLE", promptly)
	page, took := timedMetrics(t, p.Readiness)
	if took > 2*time.Second {
		t.Errorf("/metrics took %s with Envoy stopped, want under 2s", took)
	}
	for _, want := range []string{"\nzoneproxy_ready 0\n", `zoneproxy_phase{phase="ENVOY_UNREACHABLE"} 1`, "\n# Envoy stats unavailable: Envoy's admin API does not answer /ready"} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics with Envoy stopped lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, `zoneproxy_phase{phase="READY"}`) {
		t.Errorf("/metrics says READY with Envoy stopped:\n%s", page)
	}

	if err := syscall.Kill(envoy, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	harness.Eventually(t, promptly, "zoneproxy_ready 1 with Envoy's stats", func() bool {
		page, _ := timedMetrics(t, p.Readiness)
		return strings.Contains(page, "\nzoneproxy_ready 1\n") && strings.Contains(page, `zoneproxy_phase{phase="READY"} 1`) &&
			strings.Contains(page, "envoy_") && !strings.Contains(page, "Envoy stats unavailable")
	})
	if agent.Exited() {
		t.Fatal("the agent exited")
	}
}

// timedMetrics is GET /metrics and how long it took.
func timedMetrics(t *testing.T, port int) (string, time.Duration) {
	t.Helper()
	c := http.Client{Timeout: 30 * time.Second}
	start := time.Now()
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), time.Since(start)
}
