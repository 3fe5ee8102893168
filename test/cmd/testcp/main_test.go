package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--addr", "127.0.0.1:0"},
		{"--dir", t.TempDir(), "extra"},
		{"--dir", t.TempDir(), "--mesh", ""},
		{"--nope"},
		{"--dir", t.TempDir(), "--deregistration-delay", "soon"},
		{"--dir", t.TempDir(), "--cache-expiration", "1"},
		{"--dir", t.TempDir(), "--services", "-1"},
		{"--dir", t.TempDir(), "--services", "many"},
		{"--dir", t.TempDir(), "--kuma", "2.13"},
	} {
		if got := run(args); got != 2 {
			t.Errorf("run(%q) = %d, want 2", args, got)
		}
	}
}

func TestRunFailsOnAnUnusableAddress(t *testing.T) {
	// An address that cannot be bound makes Start fail before any signal wait.
	if got := run([]string{"--dir", t.TempDir(), "--addr", "256.0.0.1:0"}); got != 1 {
		t.Errorf("run = %d, want 1", got)
	}
}

func TestRunRejectsBadPolicies(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "policies.json")
	for _, body := range []string{
		`{"payments": {}}`,
		`{"payments/zp-egress-1": {"meshMetrics": {"m": {"backends": [{"type": "Graphite"}]}}}}`,
		`{"payments/zp-egress-1": {"unknown": 1}}`,
	} {
		if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := run([]string{"--dir", dir, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--policies", bad}); got != 2 {
			t.Errorf("policies %s: run = %d, want 2", body, got)
		}
	}
	if got := run([]string{"--dir", dir, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--policies", filepath.Join(dir, "missing.json")}); got != 2 {
		t.Errorf("missing policies file: run = %d, want 2", got)
	}
}
