package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// hungNoticedWithin is the relay's keepalive time plus its timeout
// (pkg/xds/relay/keepalive.go): a control plane that stops answering is
// noticed at most that long after the last thing it sent.
const hungNoticedWithin = 20*time.Second + 20*time.Second

// kuma-cp hangs while the proxy serves (stopped with SIGSTOP: its kernel
// keeps the connection up, nothing is answered). The agent notices within
// the keepalive time and timeout: the log names the unanswered ping,
// /status says the control plane does not answer, and Envoy, unrestarted,
// is served the cache. Once kuma-cp answers again, the proxy is back on it.
func TestHungControlPlaneWhileServingIsNoticed(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil)
	awaitCached(t, p)
	harness.Eventually(t, promptly, "kuma-cp to have the proxy's stream", func() bool {
		return statusOf(t, p).ControlPlane.State == "connected"
	})
	envoyPID := agent.EnvoyPID(promptly)

	zone.CP.SetFaults(controlplane.Faults{Hang: true})
	hung := time.Now()
	harness.Eventually(t, hungNoticedWithin+promptly, "the hung control plane to be noticed", func() bool {
		return statusOf(t, p).ControlPlane.State == "unreachable"
	})
	took := time.Since(hung)
	if took > hungNoticedWithin+5*time.Second {
		t.Errorf("noticed %s after kuma-cp hung, want within the keepalive time and timeout (%s)", took.Round(time.Second), hungNoticedWithin)
	}
	t.Logf("noticed %s after kuma-cp hung", took.Round(100*time.Millisecond))
	agent.AwaitLog("keepalive ping failed to receive ACK within timeout", promptly)
	harness.Eventually(t, promptly, "Envoy served the cache", func() bool {
		code, body := readinessBody(t, p)
		return code == 200 && strings.Contains(body, "serving the cached configuration")
	})
	if got := agent.EnvoyPID(promptly); got != envoyPID {
		t.Fatal("Envoy was restarted")
	}

	zone.CP.SetFaults(controlplane.Faults{})
	harness.Eventually(t, promptly, "the live configuration again", func() bool {
		code, body := readinessBody(t, p)
		return code == 200 && !strings.Contains(body, "cached") && statusOf(t, p).ControlPlane.State == "connected"
	})
}
