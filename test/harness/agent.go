package harness

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// Agent is a running zoneproxy process.
type Agent struct {
	t    testing.TB
	cmd  *exec.Cmd
	out  *SyncBuffer
	done chan struct{}
	code int
}

// StartAgent runs `zoneproxy <args...>` with extra environment entries.
// Its output is shown if the test fails; it is killed at cleanup.
func StartAgent(t testing.TB, bin string, env []string, args ...string) *Agent {
	t.Helper()
	a := &Agent{t: t, out: &SyncBuffer{}, done: make(chan struct{})}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Env = append(os.Environ(), env...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := a.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			a.code = 0
		case errors.As(err, &ee):
			a.code = ee.ExitCode()
		default:
			a.code = -1
		}
		close(a.done)
	}()
	t.Cleanup(func() {
		select {
		case <-a.done:
		default:
			_ = a.cmd.Process.Kill()
			<-a.done
		}
		if t.Failed() {
			t.Logf("zoneproxy output:\n%s", a.Output())
		}
	})
	return a
}

// Run runs zoneproxy to completion and returns its exit code and output.
func Run(t testing.TB, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	a := StartAgent(t, bin, env, args...)
	return a.Wait(30 * time.Second), a.Output()
}

// PID of the agent.
func (a *Agent) PID() int { return a.cmd.Process.Pid }

// Output is everything the agent printed so far.
func (a *Agent) Output() string { return a.out.String() }

// Signal sends sig to the agent.
func (a *Agent) Signal(sig syscall.Signal) {
	_ = a.cmd.Process.Signal(sig)
}

// Wait returns the exit code, failing the test after timeout.
func (a *Agent) Wait(timeout time.Duration) int {
	a.t.Helper()
	select {
	case <-a.done:
		return a.code
	case <-time.After(timeout):
		a.t.Fatalf("zoneproxy did not exit within %s", timeout)
		return -1
	}
}

// Exited reports whether the agent has exited.
func (a *Agent) Exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// AwaitLog waits for a line containing s.
func (a *Agent) AwaitLog(s string, timeout time.Duration) {
	a.t.Helper()
	Eventually(a.t, timeout, "log line containing "+s, func() bool { return strings.Contains(a.Output(), s) })
}

// AwaitReadiness waits until /ready answers code with body.
func (a *Agent) AwaitReadiness(port, code int, body string, timeout time.Duration) {
	a.t.Helper()
	Eventually(a.t, timeout, "readiness "+body, func() bool {
		c, b := Readiness(port)
		return c == code && b == body
	})
}

// EnvoyPID waits for the agent's Envoy child and returns its pid.
func (a *Agent) EnvoyPID(timeout time.Duration) int {
	a.t.Helper()
	var pid int
	Eventually(a.t, timeout, "Envoy child process", func() bool {
		for _, c := range Children(a.PID()) {
			if b, err := os.ReadFile("/proc/" + itoa(c) + "/cmdline"); err == nil && bytes.Contains(b, []byte("--config-path")) {
				pid = c
				return true
			}
		}
		return false
	})
	return pid
}

// SyncBuffer collects a process's output for concurrent reads.
type SyncBuffer = testutil.SyncBuffer

func itoa(i int) string { return strconv.Itoa(i) }
