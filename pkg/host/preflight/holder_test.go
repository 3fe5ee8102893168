package preflight

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-multierror"

	"github.com/zoneproxy/zoneproxy/pkg/host/preflight/procnet"
)

// A port in use names what holds it: here, this very test process.
func TestPortInUseNamesItsHolder(t *testing.T) {
	busy := busyPort(t)
	err := CheckFree(Port{"readiness-port", busy})
	comm, _ := os.ReadFile("/proc/self/comm")
	want := "it is held by pid " + strconv.Itoa(os.Getpid()) + " (" + strings.TrimSpace(string(comm)) + ") of uid " + strconv.Itoa(os.Geteuid())
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "a restart tries again, as the port may be freed") {
		t.Fatalf("got %v\nwant it to contain %q", err, want)
	}
}

// fakeProc writes a /proc with the socket tables given and processes
// (pid → comm and the socket inodes they hold).
func fakeProc(t *testing.T, tcp, tcp6 string, procs map[int][2]string) {
	t.Helper()
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "self", "net"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "self", "net", "tcp"), []byte(header+tcp), 0o644))
	must(os.WriteFile(filepath.Join(dir, "self", "net", "tcp6"), []byte(header+tcp6), 0o644))
	for pid, p := range procs {
		fd := filepath.Join(dir, strconv.Itoa(pid), "fd")
		must(os.MkdirAll(fd, 0o755))
		must(os.WriteFile(filepath.Join(dir, strconv.Itoa(pid), "comm"), []byte(p[0]+"\n"), 0o644))
		must(os.Symlink("socket:["+p[1]+"]", filepath.Join(fd, "3")))
	}
	old := procnet.Proc
	procnet.Proc = dir
	t.Cleanup(func() { procnet.Proc = old })
}

func listenLine(local, uid, inode string) string {
	return "   0: " + local + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000  " + uid + "        0 " + inode + " 1 0000000000000000 100 0 0 10 0\n"
}

// What holds a port: a process when this user may see it, else the uid
// that owns the socket (another user's process, hidden by the unit's
// ProtectProc=invisible); listeners on another address of the port do
// not count, wildcard ones do.
func TestHolderOf(t *testing.T) {
	cases := []struct {
		name, tcp, tcp6 string
		procs           map[int][2]string
		addr, want      string
	}{
		{"a process this user sees", listenLine("0100007F:26AE", "1001", "777"), "", map[int][2]string{4242: {"python3", "777"}},
			"127.0.0.1:9902", "it is held by pid 4242 (python3) of uid 1001"},
		{"another user's hidden process: its uid", listenLine("0100007F:26AE", "1001", "777"), "", nil,
			"127.0.0.1:9902", "it is held by a socket (127.0.0.1:9902) of uid 1001 whose process this user cannot see"},
		{"a wildcard listener holds every address of the port", listenLine("00000000:26AE", "1001", "777"), "", map[int][2]string{4242: {"nc", "777"}},
			"127.0.0.1:9902", "it is held by pid 4242 (nc) of uid 1001"},
		{"an IPv6 wildcard listener too", "", listenLine("00000000000000000000000000000000:26AE", "1001", "778"), map[int][2]string{4243: {"socat", "778"}},
			"127.0.0.1:9902", "it is held by pid 4243 (socat) of uid 1001"},
		{"another address of the port is no holder", listenLine("0200007F:26AE", "1001", "777"), "", nil,
			"127.0.0.1:9902", "no listener on it is in"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fakeProc(t, tc.tcp, tc.tcp6, tc.procs)
			if got := holderOf(tc.addr); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got  %s\nwant %s…", got, tc.want)
			}
		})
	}
}

// A restart may get past a port in use and an address not up yet; one
// permission denied in the list is the configuration's to fix.
func TestTransient(t *testing.T) {
	bindErr := func(errno syscall.Errno) error {
		return PortError(Port{"egress-port", "127.0.0.1:1"}, &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", errno)})
	}
	old := holderOf
	holderOf = func(string) string { return "it is held by pid 1 (x) of uid 0" }
	t.Cleanup(func() { holderOf = old })
	list := func(errs ...error) error {
		var m *multierror.Error
		for _, e := range errs {
			m = multierror.Append(m, e)
		}
		return m.ErrorOrNil()
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"a port in use", bindErr(syscall.EADDRINUSE), true},
		{"an address not up yet", bindErr(syscall.EADDRNOTAVAIL), true},
		{"a privileged port without the capability", bindErr(syscall.EACCES), false},
		{"ports in use, listed", list(bindErr(syscall.EADDRINUSE), bindErr(syscall.EADDRINUSE)), true},
		{"in use and not up yet", list(bindErr(syscall.EADDRINUSE), bindErr(syscall.EADDRNOTAVAIL)), true},
		{"in use and permission denied", list(bindErr(syscall.EADDRINUSE), bindErr(syscall.EACCES)), false},
		{"another error", errors.New("something else"), false},
		{"none", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Transient(tc.err); got != tc.want {
				t.Fatalf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
