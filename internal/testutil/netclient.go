package testutil

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// DialAs connects to addr (an IPv4 host:port) from a socket that uid
// owns: made while this thread's file-system uid is uid, which is the
// owner the kernel's socket table shows. Root only; others skip.
func DialAs(t testing.TB, uid int, addr string) net.Conn {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to own a socket as another user")
	}
	ap := netip.MustParseAddrPort(addr)
	fd, err := func() (int, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := syscall.Setfsuid(uid); err != nil {
			return -1, err
		}
		defer syscall.Setfsuid(0)
		return syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "client")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// AskWithHost sends one HTTP request to addr on conn (a new connection
// when nil), with host as its Host header, and returns the status and body.
func AskWithHost(t testing.TB, conn net.Conn, addr, method, path, host string) (int, string) {
	t.Helper()
	if conn == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conn = c
	}
	req, _ := http.NewRequest(method, "http://"+addr+path, nil)
	req.Host = host
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
