package e2e

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// While a drained proxy's listeners are closed, another process takes the
// zone port; the undrain's new Envoy cannot bind it and NACKs the
// listener. /ready says NO_ZONE_LISTENER for that reason, with the port
// and who holds it, not the control plane's conditions; once the port is
// free the agent restarts Envoy by itself and serves again.
func TestZonePortTakenDuringADrainIsExplainedAndRecovered(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil, "--drain-time", maintenanceDrainTime.String(), "--drain-min", "1s")
	egress := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Egress))
	const listener = "self_zoneegress_dp_ze-port"

	if code, out := maintain(t, p, "drain"); code != 0 || !strings.Contains(out, "DRAINED") {
		t.Fatalf("zoneproxy drain: exit %d\n%s", code, out)
	}
	// The drained Envoy closed its listeners: this test process takes the port.
	squatter, err := net.Listen("tcp", egress)
	if err != nil {
		t.Fatalf("taking the drained zone port: %v", err)
	}
	defer squatter.Close()
	envoyPID := agent.EnvoyPID(promptly)

	if code, out := maintain(t, p, "undrain"); code != 0 {
		t.Fatalf("zoneproxy undrain: exit %d\n%s", code, out)
	}
	harness.Eventually(t, promptly, "the drained Envoy to be replaced", func() bool { return harness.ProcessGone(envoyPID) })
	var st agentStatus
	harness.Eventually(t, promptly, "NO_ZONE_LISTENER for the bind", func() bool {
		st = statusOf(t, p)
		return st.Phase == "NO_ZONE_LISTENER" && strings.Contains(st.Detail, "could not bind")
	})
	for _, want := range []string{
		fmt.Sprintf("Envoy could not bind listener %s to port %d (%s: Address already in use)", listener, p.Egress, egress),
		fmt.Sprintf("another process listens on it: pid %d (e2e.test)", os.Getpid()),
		"the agent restarts Envoy as soon as the port is free",
	} {
		if !strings.Contains(st.Detail, want) {
			t.Errorf("detail %q\nwant it to contain %q", st.Detail, want)
		}
	}
	if strings.Contains(st.Detail, "MeshIdentity") {
		t.Errorf("detail %q blames the control plane", st.Detail)
	}
	if code, word := harness.Readiness(p.Readiness); code != 503 || word != "NO_ZONE_LISTENER" {
		t.Fatalf("/ready %d %s, want 503 NO_ZONE_LISTENER", code, word)
	}
	agent.AwaitLog("Envoy could not bind a zone listener", promptly)
	stuckPID := agent.EnvoyPID(promptly)

	// The port is freed: the agent restarts Envoy, which binds it.
	squatter.Close()
	agent.AwaitLog(fmt.Sprintf("restarting Envoy so that it binds listener %s on port %d", listener, p.Egress), promptly)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if !harness.ProcessGone(stuckPID) {
		t.Fatal("READY again without restarting the Envoy that had rejected the listener")
	}
	zone.HoldConnection(p, "egress") // the zone listener accepts again
	if out := agent.Output(); strings.Contains(out, "exited unexpectedly") {
		t.Fatalf("the restart was taken for a crash\n%s", out)
	}
	if agent.Exited() {
		t.Fatal("the agent stopped")
	}
}
