package envoy

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Envoy's parent-death signal follows the thread that forked it. A Start
// from a goroutine whose thread then ends (as execve ends every thread but
// one) must leave Envoy running: it is forked on the process thread.
func TestEnvoyOutlivesTheThreadThatAskedForIt(t *testing.T) {
	type started struct {
		p   *Process
		tid int
		err error
	}
	release := make(chan struct{})
	defer close(release)
	var s started
	for retry := true; retry; {
		ch := make(chan started, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if unix.Gettid() == os.Getpid() {
				// Go never ends the main thread: hold it, ask from another.
				ch <- started{tid: -1}
				<-release
				return
			}
			p, err := Start(Spec{Path: "/bin/sleep", Args: []string{"60"}, Output: func(string) {}})
			ch <- started{p, unix.Gettid(), err}
		}()
		s = <-ch
		retry = s.tid == -1
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { s.p.Kill() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(s.tid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the asking thread did not end")
		}
		runtime.Gosched()
	}
	select {
	case <-s.p.Done():
		t.Fatalf("Envoy died with the thread that asked for it: %s", s.p.ExitDescription())
	case <-time.After(500 * time.Millisecond):
	}
}

// The next program of the agent takes over an Envoy it did not start: it
// reads its output from the handed-over pipe and sees how it ends.
func TestAdoptFollowsAChildItDidNotStart(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo hello; exec sleep 60")
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	lines := make(chan string, 4)
	p, err := Adopt(cmd.Process.Pid, r, func(l string) { lines <- l })
	if err != nil {
		t.Fatal(err)
	}
	if got := <-lines; got != "hello" {
		t.Fatalf("read %q", got)
	}
	if p.PID() != cmd.Process.Pid || p.Exited() {
		t.Fatalf("pid %d, exited %v", p.PID(), p.Exited())
	}
	p.Kill()
	if got := p.ExitDescription(); got != "killed by signal killed" {
		t.Fatalf("ended %q", got)
	}
}

func TestAdoptRefusesAProcessThatIsNoChild(t *testing.T) {
	for _, pid := range []int{0, os.Getppid(), 1} {
		if _, err := Adopt(pid, nil, nil); err == nil {
			t.Errorf("adopted %d", pid)
		}
	}
}
