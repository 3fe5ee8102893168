package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// swapInRefusedToken writes a token for another workload into p's token
// file in place (not atomically), as a careless rotation does, and makes
// the control plane drop every stream so the next one carries it. It
// returns the good token, for rotateTokenBack.
func swapInRefusedToken(t *testing.T, zone *harness.Zone, p harness.Proxy) []byte {
	t.Helper()
	good, err := os.ReadFile(p.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	other, err := zone.CP.IssueToken(controlplane.TokenRequest{Mesh: "payments", Workload: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.TokenFile, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := zone.CP.Restart(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return good
}

// rotateTokenBack puts the good token back atomically (write, rename).
func rotateTokenBack(t *testing.T, p harness.Proxy, good []byte) {
	t.Helper()
	tmp := p.TokenFile + ".new"
	if err := os.WriteFile(tmp, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.TokenFile); err != nil {
		t.Fatal(err)
	}
}

// envoyWrapper writes an executable that runs onVersion (shell) when asked
// `--version` and otherwise execs the stand-in: the tests' way to watch or
// slow down the agent's version lookup.
func envoyWrapper(t *testing.T, dir, onVersion string) string {
	t.Helper()
	path := filepath.Join(dir, "envoy")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && { " + onVersion + "; }\nexec " + bins.Envoy + " \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
