package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reload runs only a program that no user but root or the agent's own
// could have replaced: in a directory every user may write, the reload is
// refused (exit 75, as every refusal on purpose), naming why, the program
// is never run, not even for the configuration check, and the agent,
// Envoy and connections go on.
func TestReloadRefusesAProgramOthersCanReplace(t *testing.T) {
	t.Parallel()
	zone, p, _, agent := readyWithConfigFile(t)
	envoyPID := agent.EnvoyPID(promptly)
	held := zone.HoldConnection(p, "egress")

	// What another user might have put there: it leaves a mark if run.
	ran := filepath.Join(t.TempDir(), "ran")
	writeFile(t, zone.Bins.Zoneproxy, "#!/bin/sh\ntouch "+ran+"\nexit 1\n", 0o755)
	if err := os.Chmod(filepath.Dir(zone.Bins.Zoneproxy), 0o777); err != nil {
		t.Fatal(err)
	}
	code, out := reloadCommand(t, zone, p)
	const says = "which is writable by other users (mode 0777)"
	if code != 75 || !strings.Contains(out, "did not reload and goes on serving") || !strings.Contains(out, says) {
		t.Fatalf("zoneproxy reload: exit %d, want 75 saying %q\n%s", code, says, out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the reload ran a program another user could have replaced")
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
