package envoy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

func TestVersionMatchersAgreeWithTheirExpressions(t *testing.T) {
	versionRe := regexp.MustCompile(`version:\s*(\S+)`)
	for _, out := range []string{
		"", "version:", "version: ", "version:x", "envoy  version: 50ef/1.39.0/Clean/RELEASE/BoringSSL\n",
		"\nenvoy  version: abc/1.39.0/Clean/RELEASE/BoringSSL\r\n\n", "version:\n\n  word tail", "version: \t\r\n",
		"version:  \nversion: second", "no version here", "Version: x", "xversion:y z",
	} {
		got, ok := versionField(out)
		m := versionRe.FindStringSubmatch(out)
		if ok != (m != nil) || ok && got != m[1] {
			t.Errorf("versionField(%q) = %q, %v; the expression finds %q", out, got, ok, m)
		}
	}
	semverRe := regexp.MustCompile(`^\d+\.\d+\.\d+([-+.][0-9A-Za-z.-]+)?$`)
	for _, s := range []string{"", "1", "1.39", "1.39.0", "1.39.0-dev", "1.39.0+build.5", "1.39.0.1", "1.39.0-",
		"1.39.0_x", "v1.39.0", "1..0", "1.39.0-dev ", "01.2.3", "1.39.0-a/b", "1.2.3-é"} {
		if got, want := semverish(s), semverRe.MatchString(s); got != want {
			t.Errorf("semverish(%q) = %v, the expression says %v", s, got, want)
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
