package portshare

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func listenReusePort(t *testing.T, addr string) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1) })
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestOwnListenerAloneIsNotShared(t *testing.T) {
	ln := listenReusePort(t, "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	pids, unseen, err := Others(port, os.Getpid())
	if err != nil || len(pids) != 0 || unseen != 0 {
		t.Fatalf("pids %v, unseen %d, err %v; want none", pids, unseen, err)
	}
}

// Another process binding the same port with SO_REUSEPORT is found by pid.
func TestAnotherProcessOnTheSamePortIsFound(t *testing.T) {
	ln := listenReusePort(t, "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	// The child is this test binary, holding the same port until killed.
	cmd := exec.Command(os.Args[0], "-test.run=TestHelperHoldPort")
	cmd.Env = append(os.Environ(), "PORTSHARE_HOLD="+strconv.Itoa(port))
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 16)
	if _, err := stdout.Read(buf); err != nil { // "bound\n"
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, _, err := Others(port, os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pids, cmd.Process.Pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not found among %v", cmd.Process.Pid, pids)
		}
	}
}

func TestHelperHoldPort(t *testing.T) {
	port := os.Getenv("PORTSHARE_HOLD")
	if port == "" {
		t.Skip("helper process")
	}
	listenReusePort(t, "127.0.0.1:"+port)
	os.Stdout.WriteString("bound\n")
	select {}
}
