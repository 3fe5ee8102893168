package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

// findEnvoy with the real binary lookup: what no restart fixes is 78 and
// names --envoy-binary; a `--version` that was killed may pass next time
// (exit 1); an answer it cannot read is a warning, not a failure.
func TestFindEnvoyErrors(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name        string
		binary      string
		wantExit    int
		says        string // in the error, or in the warning when wantExit is 0
		wantVersion string
	}{
		{name: "an Envoy", binary: script("envoy", `echo "envoy  version: 50ef09/1.39.0/Clean/RELEASE/BoringSSL"`, 0o755), wantVersion: "1.39.0"},
		{name: "a missing path", binary: filepath.Join(dir, "nope"), wantExit: exitcode.Config, says: "does not exist: install Envoy or fix --envoy-binary"},
		{name: "a name not on PATH", binary: "zoneproxy-test-no-such-envoy", wantExit: exitcode.Config, says: "not found on PATH"},
		{name: "not executable", binary: script("plain", "exit 0", 0o644), wantExit: exitcode.Config, says: "is not executable"},
		{name: "--version fails", binary: script("broken", "echo no such option >&2; exit 2", 0o755), wantExit: exitcode.Config, says: "no such option: check --envoy-binary points at Envoy"},
		{name: "--version killed", binary: script("killed", "kill -9 $$", 0o755), wantExit: 1, says: "--version` failed"},
		{name: "an answer it cannot read", binary: script("odd", "echo hello", 0o755), says: "cannot read Envoy's version", wantVersion: "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, logs := testAgent(t, &config.Config{EnvoyBinary: tt.binary})
			path, v, err := a.findEnvoy(context.Background())
			if got := exitcode.Of(err); got != tt.wantExit {
				t.Fatalf("exit %d (%v), want %d", got, err, tt.wantExit)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("%v, want %q", err, tt.says)
				}
				return
			}
			if path != tt.binary || v.Version != tt.wantVersion {
				t.Fatalf("found %s %q, want %s %q", path, v.Version, tt.binary, tt.wantVersion)
			}
			if tt.says != "" && logs.FilterMessageSnippet(tt.says).Len() != 1 {
				t.Fatalf("no warning %q", tt.says)
			}
		})
	}
}
