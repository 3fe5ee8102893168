package reexec

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The test binary plays both programs: the first listens and re-execs
// itself; the second takes the listener over and serves.
const roleVar = "REEXEC_TEST_ROLE"

type testState struct {
	Generation int    `json:"generation"`
	Note       string `json:"note"`
}

func TestMain(m *testing.M) {
	switch os.Getenv(roleVar) {
	case "first":
		os.Exit(first())
	case "second":
		os.Exit(second())
	}
	os.Exit(m.Run())
}

// first listens, says where and its PID, waits for the test's word, then
// hands the listener over to a second run of the same binary (or to
// REEXEC_TEST_PATH, to fail).
func first() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("listening", ln.Addr(), os.Getpid())
	bufio.NewReader(os.Stdin).ReadString('\n')
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	path, _ := os.Executable()
	if p := os.Getenv("REEXEC_TEST_PATH"); p != "" {
		path = p
	}
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, roleVar+"=") }),
		roleVar+"=second", EnvVar+"=stale")
	err = Exec(path, os.Args, env, map[string]*os.File{"zone": f}, testState{Generation: 2, Note: "kept"}, nil)
	// Still here: the exec failed, and the old program keeps serving.
	fd := f.Fd()
	flags, _ := fcntlGetFD(fd)
	fmt.Println("exec failed", errors.Unwrap(err) != nil, "cloexec", flags)
	c, err := ln.Accept()
	if err == nil {
		io.WriteString(c, "served by the first\n")
		c.Close()
	}
	return 0
}

// second takes the listener over and answers one connection with what it
// was handed.
func second() int {
	h, err := Take()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var st testState
	if err := h.State(&st); err != nil {
		fmt.Println("error", err)
		return 1
	}
	ln, err := h.Listener("zone")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	_, leaked := os.LookupEnv(EnvVar)
	fmt.Println("taken over", os.Getpid(), "generation", st.Generation, st.Note, "env left", leaked)
	c, err := ln.Accept()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	io.WriteString(c, "served by the second\n")
	c.Close()
	return 0
}

func fcntlGetFD(fd uintptr) (int, error) {
	out, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(fd)))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return int(n & 0o2000000), err // O_CLOEXEC
		}
	}
	return 0, errors.New("no flags")
}

// start runs the first program and returns its address, PID and output.
func start(t *testing.T, extraEnv ...string) (addr string, pid int, stdin io.WriteCloser, out *bufio.Scanner, cmd *exec.Cmd) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), roleVar+"=first"), extraEnv...)
	stdin, _ = cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out = bufio.NewScanner(stdout)
	if !out.Scan() {
		t.Fatal("the first program said nothing")
	}
	if _, err := fmt.Sscan(strings.TrimPrefix(out.Text(), "listening"), &addr, &pid); err != nil {
		t.Fatalf("%q: %v", out.Text(), err)
	}
	return addr, pid, stdin, out, cmd
}

func readLine(t *testing.T, c net.Conn) string {
	t.Helper()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("the queued connection was not served: %v", err)
	}
	return strings.TrimSpace(line)
}

// A connection made before the exec, waiting in the accept queue, is
// served by the new program in the same process: nothing is dropped.
func TestExecHandsTheListenerToTheNewProgramInTheSameProcess(t *testing.T) {
	addr, pid, stdin, out, cmd := start(t)
	queued, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()
	io.WriteString(stdin, "go\n")
	if !out.Scan() {
		t.Fatal("the second program said nothing")
	}
	want := fmt.Sprintf("taken over %d generation 2 kept env left false", pid)
	if got := out.Text(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := readLine(t, queued); got != "served by the second" {
		t.Errorf("the queued connection got %q", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the second program: %v", err)
	}
}

// An exec that cannot happen leaves the old program serving, with its
// listener closed on exec again (a later child must not inherit it).
func TestFailedExecKeepsTheOldProgramServing(t *testing.T) {
	assertExecFails(t, "/nonexistent/zoneproxy")
}

// assertExecFails hands over to path, and sees the exec fail and the old
// program go on serving, its listener closed on exec again.
func assertExecFails(t *testing.T, path string) {
	t.Helper()
	addr, _, stdin, out, _ := start(t, "REEXEC_TEST_PATH="+path)
	io.WriteString(stdin, "go\n")
	if !out.Scan() {
		t.Fatal("the first program said nothing after the exec")
	}
	if got, want := out.Text(), "exec failed true cloexec 524288"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := readLine(t, c); got != "served by the first" {
		t.Errorf("got %q", got)
	}
}

func TestTakeWithoutHandover(t *testing.T) {
	t.Setenv(EnvVar, "")
	os.Unsetenv(EnvVar)
	if _, err := Take(); !errors.Is(err, ErrNotHandedOver) {
		t.Errorf("got %v, want ErrNotHandedOver", err)
	}
	for _, v := range []string{"x", "1", "-4"} {
		t.Setenv(EnvVar, v)
		if _, err := Take(); err == nil || !strings.Contains(err.Error(), "not a descriptor") {
			t.Errorf("%s=%q: got %v", EnvVar, v, err)
		}
	}
}
