package envoy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `envoy --version` (often a wrapper script) sees no more of the agent's
// environment than Envoy does: not the token in ZONEPROXY_*, not systemd's
// notify socket.
func TestVersionRunsWithEnvoysEnvironment(t *testing.T) {
	t.Setenv("ZONEPROXY_DATAPLANE_TOKEN", "eyJhbGciOiJSUzI1NiJ9.secret.sig")
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("ENVOY_TEST_KEPT", "yes")
	dir := t.TempDir()
	dump := filepath.Join(dir, "env")
	path := filepath.Join(dir, "envoy")
	script := "#!/bin/sh\nenv > " + dump + "\necho 'envoy  version: abc/1.39.0/Clean/RELEASE/BoringSSL'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadVersion(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"ZONEPROXY_", "secret", "NOTIFY_SOCKET"} {
		if strings.Contains(string(env), gone) {
			t.Errorf("`--version` saw %s:\n%s", gone, env)
		}
	}
	if !strings.Contains(string(env), "ENVOY_TEST_KEPT=yes") {
		t.Errorf("`--version` lost the rest of the environment:\n%s", env)
	}
}
