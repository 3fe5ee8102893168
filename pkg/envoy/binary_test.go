package envoy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseVersionReadsTheBuild(t *testing.T) {
	tests := []struct {
		out, version, build string
	}{
		{"envoy  version: 50ef/1.39.0/Clean/RELEASE/BoringSSL\n", "1.39.0", "50ef/1.39.0/Clean/RELEASE/BoringSSL"},
		{"\nenvoy  version: abc/1.39.0-dev/Modified/DEBUG/BoringSSL\r\n\n", "1.39.0-dev", "abc/1.39.0-dev/Modified/DEBUG/BoringSSL"},
		{"version:\n\n  abc/1.2.3+build.5/Clean tail", "1.2.3+build.5", "abc/1.2.3+build.5/Clean"},
		{"version: abc/1.39.0.1/Clean", "1.39.0.1", "abc/1.39.0.1/Clean"},
		{"", "", ""},
		{"version: \t\r\n", "", ""},
		{"no version here", "", ""},
		{"Version: abc/1.39.0/Clean", "", ""},
		{"version: abc/1.39/Clean", "", ""},
		{"version: abc/v1.39.0/Clean", "", ""},
		{"version: abc/1.39.0_x/Clean", "", ""},
		{"version: 1.39.0", "", ""},
	}
	for _, tt := range tests {
		v, err := ParseVersion(tt.out)
		if tt.version == "" {
			if err == nil {
				t.Errorf("ParseVersion(%q) = %+v, want an error", tt.out, v)
			}
			continue
		}
		if err != nil || v.Version != tt.version || v.Build != tt.build {
			t.Errorf("ParseVersion(%q) = %+v, %v; want %s %s", tt.out, v, err, tt.version, tt.build)
		}
	}
}

// A `--version` run that failed for reasons outside the binary is
// transient (the agent exits 1, and is restarted); one the binary
// answered with a failure is not (78: fix --envoy-binary).
func TestVersionFailuresThatARestartMayGetPast(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		deadline     time.Duration
		transient    bool
	}{
		{"killed by a signal (the OOM killer)", "kill -9 $$", 0, true},
		{"timed out", "exec sleep 30", 100 * time.Millisecond, true},
		{"exits with a failure", "echo 'unknown option --version' >&2; exit 3", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "envoy")
			if err := os.WriteFile(path, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			_, err := ReadVersion(ctx, path)
			if err == nil || IsTransient(err) != tc.transient {
				t.Fatalf("err %v, transient %v; want an error, transient %v", err, IsTransient(err), tc.transient)
			}
		})
	}
}
