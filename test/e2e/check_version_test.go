package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// check takes Envoy's version from the state dir that run keeps it in,
// without running `envoy --version`, and writes nothing there itself.
func TestCheckReadsTheVersionCacheOfRun(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	dir := harness.ShortTempDir(t)
	asked := filepath.Join(dir, "asked")
	wrapper := envoyWrapper(t, dir, "echo x >> "+asked)
	asks := func() int {
		b, _ := os.ReadFile(asked)
		return strings.Count(string(b), "x")
	}

	// Without a record, check runs --version and leaves the state dir alone.
	args := zone.Args(p, "--envoy-binary", wrapper)
	args[0] = "check"
	_, out := harness.Run(t, bins.Zoneproxy, nil, args...)
	if asks() != 1 || !strings.Contains(out, "found, version 1.39.0\n") {
		t.Fatalf("check before any run: --version ran %d times, want 1\n%s", asks(), out)
	}
	if _, err := os.Stat(p.StateDir); !os.IsNotExist(err) {
		t.Fatalf("check created the state dir %s (%v)", p.StateDir, err)
	}

	agent := zone.Start(p, nil, "--envoy-binary", wrapper)
	agent.AwaitLog("started Envoy", 30*time.Second)
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("run exit %d\n%s", code, agent.Output())
	}
	if asks() != 2 {
		t.Fatalf("run: --version ran %d times in all, want 2", asks())
	}

	_, out = harness.Run(t, bins.Zoneproxy, nil, args...)
	if asks() != 2 || !strings.Contains(out, "found, version 1.39.0 (as run recorded it in --state-dir)") {
		t.Fatalf("check after a run: --version ran %d times in all, want 2 (the cached version)\n%s", asks(), out)
	}
}
