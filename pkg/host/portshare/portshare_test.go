package portshare

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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

func addrPort(ln net.Listener) netip.AddrPort { return ln.Addr().(*net.TCPAddr).AddrPort() }

func TestOwnListenerAloneIsNotShared(t *testing.T) {
	ln := listenReusePort(t, "127.0.0.1:0")
	pids, unseen, err := Others(addrPort(ln), os.Getpid())
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
		pids, _, err := Others(addrPort(ln), os.Getpid())
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

// The addresses as /proc/net/tcp and tcp6 print them, on this host's byte order.
func TestProcAddr(t *testing.T) {
	word := func(b ...byte) string { return fmt.Sprintf("%08X", binary.NativeEndian.Uint32(b)) }
	cases := []struct {
		ip   string
		v6   bool
		want string
	}{
		{"127.0.0.1", false, word(127, 0, 0, 1)},
		{"10.0.0.5", false, word(10, 0, 0, 5)},
		{"10.0.0.5", true, word(0, 0, 0, 0) + word(0, 0, 0, 0) + word(0, 0, 0xff, 0xff) + word(10, 0, 0, 5)},
		{"::1", true, word(0, 0, 0, 0) + word(0, 0, 0, 0) + word(0, 0, 0, 0) + word(0, 0, 0, 1)},
		{"::1", false, ""},
	}
	for _, tc := range cases {
		if got := procAddr(netip.MustParseAddr(tc.ip), tc.v6); got != tc.want {
			t.Errorf("procAddr(%s, v6 %t) = %q, want %q", tc.ip, tc.v6, got, tc.want)
		}
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 && procAddr(netip.MustParseAddr("127.0.0.1"), false) != "0100007F" {
		t.Error("127.0.0.1 on a little-endian host is 0100007F in /proc/net/tcp")
	}
}

// Only sockets on the same address and port share connections with
// SO_REUSEPORT: another process on another address of the port is no
// sharer, unless the listener is on the wildcard address.
func TestOnlyTheSameAddressShares(t *testing.T) {
	dir := t.TempDir()
	old := Proc
	Proc = dir
	t.Cleanup(func() { Proc = old })
	word := func(b ...byte) string { return fmt.Sprintf("%08X", binary.NativeEndian.Uint32(b)) }
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	line := func(local, inode string) string {
		return "   0: " + local + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 " + inode + " 1 0 100 0 0 10 0\n"
	}
	write := func(path, content string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "self", "net", "tcp"), header+
		line(word(10, 0, 0, 5)+":1626", "100")+ // ours: 10.0.0.5:5670
		line(word(10, 0, 0, 6)+":1626", "200")+ // another proxy on 10.0.0.6:5670
		line(word(10, 0, 0, 5)+":1627", "300")) // 10.0.0.5:5671
	socket := func(pid, inode string) {
		if err := os.MkdirAll(filepath.Join(dir, pid, "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("socket:["+inode+"]", filepath.Join(dir, pid, "fd", "3")); err != nil {
			t.Fatal(err)
		}
	}
	socket("10", "100")
	socket("20", "200")

	pids, unseen, err := Others(netip.MustParseAddrPort("10.0.0.5:5670"), 10)
	if err != nil || len(pids) != 0 || unseen != 0 {
		t.Errorf("10.0.0.5:5670: pids %v, unseen %d, err %v; want none (10.0.0.6 has its own group)", pids, unseen, err)
	}
	write(filepath.Join(dir, "self", "net", "tcp"), header+
		line(word(10, 0, 0, 5)+":1626", "100")+
		line(word(10, 0, 0, 5)+":1626", "200"))
	pids, unseen, err = Others(netip.MustParseAddrPort("10.0.0.5:5670"), 10)
	if err != nil || !slices.Equal(pids, []int{20}) || unseen != 0 {
		t.Errorf("both on 10.0.0.5:5670: pids %v, unseen %d, err %v; want [20]", pids, unseen, err)
	}
	write(filepath.Join(dir, "self", "net", "tcp"), header+
		line(word(0, 0, 0, 0)+":1626", "100")+
		line(word(10, 0, 0, 6)+":1626", "200"))
	pids, _, err = Others(netip.MustParseAddrPort("0.0.0.0:5670"), 10)
	if err != nil || !slices.Equal(pids, []int{20}) {
		t.Errorf("ours on the wildcard: pids %v, err %v; want [20]", pids, err)
	}
}
