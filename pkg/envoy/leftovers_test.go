package envoy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An Envoy left running on this work dir's bootstrap (behind a wrapper
// that did not exec it) is ended with its group; one on another bootstrap
// is not touched.
func TestLeftoversOnTheBootstrapAreEnded(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "envoy")
	// The "wrapper" waits on a child of its own, which does not name the
	// bootstrap, and writes its pid beside the bootstrap ($2).
	body := "#!/bin/sh\nsleep 300 &\necho $! > \"$2.tmp\"\nmv \"$2.tmp\" \"$2.child\"\nwait\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(config string) *exec.Cmd {
		if err := os.MkdirAll(filepath.Dir(config), 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(script, "--config-path", config, "--log-level", "info")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		return cmd
	}
	ours := filepath.Join(dir, "wd", "bootstrap.yaml")
	left := start(ours)
	other := start(filepath.Join(dir, "other", "bootstrap.yaml"))
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; {
		if b, err := os.ReadFile(ours + ".child"); err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the wrapper did not start its child")
		}
		time.Sleep(10 * time.Millisecond)
	}

	ended := EndLeftovers(ours, 10*time.Second)
	if !slices.Equal(ended, []int{left.Process.Pid}) {
		t.Errorf("ended %v, want only %d", ended, left.Process.Pid)
	}
	if alive(left.Process.Pid) {
		t.Error("the leftover still runs")
	}
	if alive(child) {
		t.Error("the leftover's group still runs")
	}
	if !alive(other.Process.Pid) {
		t.Error("an Envoy on another bootstrap was ended")
	}
}
