package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// agent is one zoneproxy process. Its output is kept and scanned line by
// line so that waits are driven by the log, not by polling.
type agent struct {
	cmd      *exec.Cmd
	execAt   time.Time // just before fork/exec
	execMono uint64    // the same, on the kernel's exec-event clock
	stamp    string    // where the Envoy wrapper writes its launch time
	workDir  string
	exitedAt time.Time
	done     chan struct{}
	code     int

	mu    sync.Mutex
	lines []string
	subs  []logSub
}

type logSub struct {
	substr string
	ch     chan string
}

// startAgent execs zoneproxy with args. stamp and env are passed to the
// wrapper through the environment, which the agent hands on to Envoy.
func startAgent(bin string, args []string, stamp, workDir string, env ...string) (*agent, error) {
	a := &agent{stamp: stamp, workDir: workDir, done: make(chan struct{})}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Env = append(append(agentEnv(), "ZPBENCH_STAMP="+stamp), env...)
	// Killed with the benchmark if it dies; never a child of a terminal's ^C.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	a.cmd.Stdout, a.cmd.Stderr = w, w
	a.execAt, a.execMono = time.Now(), monoNow()
	if err := a.cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	w.Close()
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		a.scan(r)
	}()
	go func() {
		err := a.cmd.Wait()
		a.exitedAt = time.Now()
		<-scanned
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			a.code = ee.ExitCode()
		default:
			a.code = -1
		}
		close(a.done)
	}()
	return a, nil
}

// agentEnv is the benchmark's environment without settings that would
// change the agent's configuration or make it talk to systemd.
func agentEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ZONEPROXY_") || strings.HasPrefix(kv, "NOTIFY_SOCKET=") ||
			strings.HasPrefix(kv, "WATCHDOG_") || strings.HasPrefix(kv, "GODEBUG=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (a *agent) scan(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		a.mu.Lock()
		a.lines = append(a.lines, line)
		keep := a.subs[:0]
		for _, s := range a.subs {
			if strings.Contains(line, s.substr) {
				s.ch <- line
			} else {
				keep = append(keep, s)
			}
		}
		a.subs = keep
		a.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

// awaitLog returns the first line containing substr, waiting up to timeout.
func (a *agent) awaitLog(substr string, timeout time.Duration) (string, error) {
	ch := make(chan string, 1)
	a.mu.Lock()
	for _, l := range a.lines {
		if strings.Contains(l, substr) {
			a.mu.Unlock()
			return l, nil
		}
	}
	a.subs = append(a.subs, logSub{substr, ch})
	a.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l := <-ch:
		return l, nil
	case <-a.done:
		select {
		case l := <-ch:
			return l, nil
		default:
		}
		return "", fmt.Errorf("zoneproxy exited (code %d) before logging %q:\n%s", a.code, substr, a.tail(15))
	case <-t.C:
		return "", fmt.Errorf("no %q in zoneproxy's log after %s:\n%s", substr, timeout, a.tail(15))
	}
}

func (a *agent) output() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.lines...)
}

func (a *agent) tail(n int) string {
	l := a.output()
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return "  " + strings.Join(l, "\n  ")
}

func (a *agent) pid() int { return a.cmd.Process.Pid }

func (a *agent) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

func (a *agent) signal(sig syscall.Signal) { _ = a.cmd.Process.Signal(sig) }

// wait returns the exit code, or an error after timeout.
func (a *agent) wait(timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-a.done:
		return a.code, nil
	case <-t.C:
		return -1, fmt.Errorf("zoneproxy (pid %d) did not exit within %s", a.pid(), timeout)
	}
}

// kill ends the agent at once; for cleanup after a failed measurement.
func (a *agent) kill() {
	select {
	case <-a.done:
	default:
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// launchedAt is the wrapper's stamp of the Envoy launch (exec with
// --config-path), waiting up to timeout for the file to appear.
func (a *agent) launchedAt(timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		if t, err := readStamp(a.stamp); err == nil {
			return t, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no Envoy launch stamp in %s after %s:\n%s", a.stamp, timeout, a.tail(15))
		}
		time.Sleep(time.Millisecond)
	}
}

// readStamp reads the time on the first line of a stamp file: `date
// +%s%N`, after the wrapper's pid where it wrote one.
func readStamp(path string) (time.Time, error) {
	_, t, err := readStampPID(path)
	return t, err
}

// readStampPID reads the first line of a stamp file, "[pid] ns".
func readStampPID(path string) (int, time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, time.Time{}, err
	}
	line, _, complete := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if !complete || len(fields) == 0 || len(fields) > 2 {
		return 0, time.Time{}, fmt.Errorf("stamp %s: no complete line yet", path)
	}
	ns, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("stamp %s: %w", path, err)
	}
	pid := 0
	if len(fields) == 2 {
		if pid, err = strconv.Atoi(fields[0]); err != nil {
			return 0, time.Time{}, fmt.Errorf("stamp %s: %w", path, err)
		}
	}
	return pid, time.Unix(0, ns), nil
}

// logTime reads the timestamp zap puts first on a console log line.
func logTime(line string) (time.Time, bool) {
	ts, _, ok := strings.Cut(line, "\t")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
	return t, err == nil
}
