package cli

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
)

func TestAgentCommandLine(t *testing.T) {
	cases := []struct {
		args   []string
		agent  bool
		config string
	}{
		{[]string{"/usr/bin/zoneproxy", "run", "--config", "/etc/zoneproxy/a.yaml"}, true, "/etc/zoneproxy/a.yaml"},
		{[]string{"zoneproxy", "run", "--mesh", "m", "--config=a.yaml"}, true, "a.yaml"},
		{[]string{"zoneproxy", "run", "--mesh", "m"}, true, ""},
		{[]string{"zoneproxy", "run", "--", "--config", "x"}, true, ""},
		{[]string{"/usr/bin/zoneproxy", "check", "--config", "/etc/zoneproxy/a.yaml"}, false, "/etc/zoneproxy/a.yaml"},
		{[]string{"/usr/local/bin/envoy", "run"}, false, ""},
		{[]string{"zoneproxy"}, false, ""},
		{nil, false, ""},
	}
	for _, tc := range cases {
		if got := isAgentArgs(tc.args); got != tc.agent {
			t.Errorf("isAgentArgs(%q) = %v", tc.args, got)
		}
		if got := flagValue(tc.args, "config"); got != tc.config {
			t.Errorf("flagValue(%q) = %q, want %q", tc.args, got, tc.config)
		}
	}
}

// The ports a process tree listens on, from /proc: what tells the running
// instance's ports from another program's.
func TestListeningPortsOfAProcessTree(t *testing.T) {
	mine, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	other, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback")
	}
	defer other.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	port := mine.Addr().(*net.TCPAddr).Port
	port6 := other.Addr().(*net.TCPAddr).Port

	ports := listeningPorts([]int{os.Getpid()})
	if !ports[port] || !ports[port6] {
		t.Fatalf("ports %v lack %d and %d", ports, port, port6)
	}
	in := &instance{pid: os.Getpid(), ports: ports}
	if !in.holds(preflight.Port{Addr: mine.Addr().String()}) {
		t.Errorf("does not hold its own port")
	}
	if in.holds(preflight.Port{Addr: closed.Addr().String()}) {
		t.Errorf("holds %s, closed", closed.Addr())
	}
	// A child's ports are not its parent's own, but the tree's.
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if !slices.Contains(descendants(os.Getpid()), child.Process.Pid) {
		t.Errorf("descendants lack child %d", child.Process.Pid)
	}
	// Unknown ports (another user's process): every busy port is its.
	if !(&instance{}).holds(preflight.Port{Addr: "127.0.0.1:9902"}) {
		t.Error("an instance of unknown ports holds nothing")
	}
}

// An agent that is not dumpable lists its descriptors but hides their
// targets, even from its own user: its ports are unknown (so every busy
// port may be its), never "none", which made check fail its own ports.
func TestHiddenDescriptorsMeanUnknownPorts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	readFDLink = func(string) (string, error) { return "", &os.PathError{Op: "readlink", Err: os.ErrPermission} }
	defer func() { readFDLink = os.Readlink }()
	ports := listeningPorts([]int{os.Getpid()})
	if ports != nil {
		t.Fatalf("ports %v, want unknown (nil)", ports)
	}
	if !(&instance{pid: os.Getpid(), ports: ports}).holds(preflight.Port{Addr: ln.Addr().String()}) {
		t.Error("the instance does not hold its own port")
	}
}
