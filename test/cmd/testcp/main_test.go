package main

import "testing"

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--addr", "127.0.0.1:0"},
		{"--dir", t.TempDir(), "extra"},
		{"--dir", t.TempDir(), "--mesh", ""},
		{"--nope"},
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
