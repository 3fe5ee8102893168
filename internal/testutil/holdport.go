package testutil

import (
	"net"
	"testing"
)

// HoldPort listens on a free 127.0.0.1 port until the test ends (or the
// caller closes it first, to free the port).
func HoldPort(t testing.TB) (net.Listener, uint32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, uint32(ln.Addr().(*net.TCPAddr).Port)
}
