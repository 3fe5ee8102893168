package envoy

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WarmUp runs in every agent's start: it must not keep the handle it opens.
func TestWarmUpLeavesNoDescriptorOpen(t *testing.T) {
	before := openFDs(t)
	for range 3 {
		WarmUp()
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d open descriptors after WarmUp, %d before", after, before)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// A wrapper that started Envoy without exec'ing it takes its children
// with it when it ends: left running, they would keep Envoy's ports.
func TestWhatEnvoysGroupHoldsEndsWithIt(t *testing.T) {
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "envoy")
	pidFile := filepath.Join(dir, "child.pid")
	script := "#!/bin/sh\nsleep 300 >/dev/null 2>&1 &\necho $! > " + pidFile + ".tmp\nmv " + pidFile + ".tmp " + pidFile + "\nexit 0\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Start(Spec{Path: wrapper, Dir: dir, Output: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	deadline := time.Now().Add(10 * time.Second)
	for alive(child) { // a zombie waiting for its reaper (this test's init) is gone
		if time.Now().After(deadline) {
			t.Fatalf("the wrapper's child %d still runs after Envoy's group ended", child)
		}
		runtime.Gosched()
	}
}
