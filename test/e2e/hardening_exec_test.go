package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reload runs only a program that no user but root or the agent's own
// could have replaced: in a directory every user may write, the reload is
// refused, naming why, and the agent, Envoy and connections go on.
func TestReloadRefusesAProgramOthersCanReplace(t *testing.T) {
	t.Parallel()
	zone, p, _, agent := readyWithConfigFile(t)
	envoyPID := agent.EnvoyPID(promptly)
	held := zone.HoldConnection(p, "egress")

	if err := os.Chmod(filepath.Dir(zone.Bins.Zoneproxy), 0o777); err != nil {
		t.Fatal(err)
	}
	code, out := reloadCommand(t, zone, p)
	const says = "which is writable by other users (mode 0777)"
	if code != 1 || !strings.Contains(out, "did not reload and goes on serving") || !strings.Contains(out, says) {
		t.Fatalf("zoneproxy reload: exit %d, want 1 saying %q\n%s", code, says, out)
	}
	if agent.Exited() || !stillOpen(held) {
		t.Fatal("a refused reload cost the agent or a connection")
	}
	if pid := agent.EnvoyPID(promptly); pid != envoyPID {
		t.Fatalf("Envoy is pid %d, was %d", pid, envoyPID)
	}
	if c, body := readinessBody(t, p); c != 200 {
		t.Fatalf("/ready %d %q after a refused reload", c, body)
	}
}
