package envoy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
)

// State is where the Envoy process is in its life.
type State int32

const (
	Running State = iota
	Stopping
	Exited
)

func (s State) String() string {
	return [...]string{"running", "stopping", "exited"}[s]
}

// Spec describes the process to start.
type Spec struct {
	Path   string
	Args   []string
	Env    []string
	Dir    string
	Output func(line string) // each line of Envoy's stdout and stderr
}

// Process is a running Envoy. It lives in its own process group, and the
// kernel kills it if the agent dies (parent-death signal), so no Envoy ever
// outlives its agent. It is forked on the process thread (reexec.Do): the
// signal follows the thread that forked it, and that one thread outlives
// every reload of the agent (reexec.Main).
type Process struct {
	proc   *os.Process
	output *os.File // the read end of Envoy's stdout and stderr
	done   chan struct{}

	mu      sync.Mutex
	state   State
	waitErr error
}

// WarmUp does ahead what the process's first Start would otherwise do
// on the way to Envoy's exec: on Linux, package os checks once whether
// pidfds work, with a throwaway fork of its own, the first
// time the process starts or finds a process. Run it while waiting for
// something else, such as the bootstrap.
func WarmUp() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Release()
	}
}

// Start launches the process.
func Start(spec Spec) (*Process, error) {
	// An explicit pipe, not a Go writer: its read end can be handed to the
	// agent's next program (Output), which goes on reading Envoy's lines.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting Envoy: %w", err)
	}
	defer w.Close()
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true, // a terminal's ^C reaches the agent only; it decides
		Pdeathsig: syscall.SIGKILL,
	}
	reexec.Do(func() { err = cmd.Start() })
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("starting Envoy: %w", err)
	}
	return follow(cmd.Process, r, spec.Output), nil
}

// Adopt supervises the Envoy an earlier program in this process started
// (the process is the same, so Envoy is still its child): pid, and the read
// end of its output the earlier program handed over. Its parent-death
// signal still follows the process thread, which this program runs on.
func Adopt(pid int, output *os.File, emit func(string)) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("adopting Envoy: %d is not a process id", pid)
	}
	var info unix.Siginfo
	// Only a child of this process can be waited for: a pid reused by
	// another process is refused here.
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return nil, fmt.Errorf("adopting Envoy (pid %d): it is not a child of this process: %w", pid, err)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil, fmt.Errorf("adopting Envoy (pid %d): %w", pid, err)
	}
	return follow(proc, output, emit), nil
}

// follow reads output into emit and waits for proc.
func follow(proc *os.Process, output *os.File, emit func(string)) *Process {
	p := &Process{proc: proc, output: output, done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		if output == nil {
			return
		}
		out := &lineWriter{emit: emit}
		_, _ = io.Copy(out, output)
		out.flush()
	}()
	go func() {
		endGroupOnExit(proc.Pid)
		ps, err := proc.Wait()
		if err == nil && !ps.Success() {
			err = &exec.ExitError{ProcessState: ps}
		}
		// The group is gone, so the pipe's writers are: the rest of the
		// output comes at once (bounded, as exec.Cmd's WaitDelay was).
		select {
		case <-read:
		case <-time.After(time.Second):
		}
		p.mu.Lock()
		p.waitErr, p.state = err, Exited
		p.mu.Unlock()
		close(p.done)
	}()
	return p
}

// Output is the read end of Envoy's output, to hand to the agent's next
// program; nil if there is none.
func (p *Process) Output() *os.File { return p.output }

// endGroupOnExit waits for Envoy to exit, without reaping it, then kills
// what is left of its process group: the children of a wrapper that did
// not exec Envoy, which would otherwise keep Envoy's ports. The leader is
// reaped only after, so its pid, the group's id, cannot have been reused.
func endGroupOnExit(pid int) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	for err == syscall.EINTR {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}
	if err == nil { // else Envoy may still run: its group is left alone
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// PID of the Envoy process.
func (p *Process) PID() int { return p.proc.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// State is the current state.
func (p *Process) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.State() == Exited }

// StoppedBySignal reports whether the process ended the way Envoy ends when
// asked to stop: exit status 0, or killed by SIGTERM or SIGINT. A crash
// (another signal, a non-zero status) is not. Valid after Done.
func (p *Process) StoppedBySignal() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waitErr == nil {
		return true
	}
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGINT)
}

// ExitDescription says how the process ended, e.g. "exit status 1" or
// "killed by signal segmentation fault". Valid after Done.
func (p *Process) ExitDescription() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if p.waitErr != nil {
		return p.waitErr.Error()
	}
	return "exit status 0"
}

// Stop sends SIGTERM to Envoy's process group and SIGKILL after grace.
// It returns once the process is gone and reports whether SIGKILL was needed.
func (p *Process) Stop(grace time.Duration) (killed bool) {
	p.mu.Lock()
	if p.state == Running {
		p.state = Stopping
	}
	p.mu.Unlock()
	p.signalGroup(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return false
	case <-t.C:
	}
	p.signalGroup(syscall.SIGKILL)
	<-p.done
	return true
}

// Kill ends the process group at once and waits for it.
func (p *Process) Kill() {
	p.signalGroup(syscall.SIGKILL)
	<-p.done
}

func (p *Process) signalGroup(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	// Negative pid: the whole group Envoy leads.
	_ = syscall.Kill(-p.proc.Pid, sig)
}

// lineWriter turns Envoy's output into lines for the agent's log.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 { // a runaway line without newline
		w.line(w.buf)
		w.buf = nil
	}
	return len(b), nil
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(w.buf)
		w.buf = nil
	}
}

func (w *lineWriter) line(b []byte) {
	b = bytes.TrimRight(b, "\r")
	if len(b) > 0 && w.emit != nil {
		w.emit(string(b))
	}
}
