package upgrade

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
)

// program is an executable that prints out and exits with code.
func program(t *testing.T, out string, code int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "zoneproxy")
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s' '%s'\necho 'checked:' >&2\nexit %d\n", out, code)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// What the check of the new program refuses, and whether a later reload
// may do better (75) or only a restart (69).
func TestTheNewProgramsCheck(t *testing.T) {
	current := fmt.Sprintf(`{"manifest":%d,"handover":%d,"version":"2.1.0","envoy":{"mesh":"payments"}}`, reexec.ManifestVersion, Version)
	for _, tc := range []struct {
		name    string
		exe     func(t *testing.T) string
		refusal string
		restart bool
	}{
		{"it reads this handover", func(t *testing.T) string { return program(t, current, 0) }, "", false},
		{"missing", func(*testing.T) string { return "/nonexistent/zoneproxy" }, "the new program cannot take over: cannot run /nonexistent/zoneproxy", false},
		{"its configuration is refused", func(t *testing.T) string { return program(t, "", 78) }, "cannot take over: checked: (exit 78)", false},
		{"an older zoneproxy", func(t *testing.T) string { return program(t, "Error: unknown flag: --handover-check", 0) }, "does not say what it can take over (is it an older zoneproxy?)", true},
		{"another handover version", func(t *testing.T) string {
			return program(t, fmt.Sprintf(`{"manifest":%d,"handover":%d,"version":"3.0.0"}`, reexec.ManifestVersion, Version+1), 0)
		}, fmt.Sprintf("reads handover version %d.%d, this one writes %d.%d; restart instead", reexec.ManifestVersion, Version+1, reexec.ManifestVersion, Version), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe := tc.exe(t)
			c, err := CheckProgram(exe, []string{exe, "run", "--config", "/etc/zoneproxy/zp.yaml"})
			if err == nil {
				err = c.Verdict(nil)
			}
			checkRefusal(t, err, tc.refusal, tc.restart)
			if err == nil && (c.Version != "2.1.0" || c.Envoy["mesh"] != "payments") {
				t.Fatalf("read %+v", c)
			}
		})
	}
}

// With Envoy running, a configuration that changes what the proxy is
// needs a restart; one that changes only the launch is a reload (and an
// Envoy handover).
func TestAVerdictOnTheNewConfiguration(t *testing.T) {
	c := Check{Manifest: reexec.ManifestVersion, Handover: Version, Envoy: map[string]string{"mesh": "orders"}}
	changes := func(changed ...string) func(map[string]string) []string {
		return func(map[string]string) []string { return changed }
	}
	checkRefusal(t, c.Verdict(changes()), "", false)
	checkRefusal(t, c.Verdict(changes("--mesh", "--name")), "changes the proxy's identity or where its xDS goes, which the running Envoy was started with (--mesh, --name); restart to apply it", false)
}

func checkRefusal(t *testing.T, err error, refusal string, restart bool) {
	t.Helper()
	if refusal == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil || !errors.Is(err, ErrReloadRefused) || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("got %v, want a refusal saying %q", err, refusal)
	}
	if errors.As(err, new(CannotReload)) != restart {
		t.Fatalf("%v: only a restart lifts it: %v, want %v", err, !restart, restart)
	}
}

// A long answer is cut, on one line.
func TestOneLine(t *testing.T) {
	if got := oneLine("a\n  b\tc"); got != "a b c" {
		t.Fatalf("%q", got)
	}
	if got := oneLine(strings.Repeat("x", 700)); len(got) != 600+len("…") {
		t.Fatalf("%d bytes", len(got))
	}
}
