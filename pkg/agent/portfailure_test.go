package agent

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
)

// A port in use may be freed (a local user's squatter must not stop the
// agent for good, standing in for it on /ready) and an address that is not
// on this host yet may come up: exit 1, systemd restarts the agent. A port
// refused for want of the capability is the configuration's: 78.
func TestPortFailureExitCodes(t *testing.T) {
	busy, err := preflight.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	refused := preflight.PortError(preflight.Port{Flag: "egress-port", Addr: "10.0.0.5:80"},
		&net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EACCES)})
	for _, tc := range []struct {
		name string
		err  func() error
		want int
		says string
	}{
		{"port in use", func() error {
			return preflight.CheckFree(preflight.Port{Flag: "ingress-port", Addr: busy.Addr().String()})
		}, 1, "it is held by pid "},
		{"the readiness port in use", func() error {
			_, err := preflight.Listen(busy.Addr().String())
			return preflight.PortError(preflight.Port{Flag: "readiness-port", Addr: busy.Addr().String()}, err)
		}, 1, "it is held by pid "},
		{"address not on this host", func() error {
			return preflight.CheckFree(preflight.Port{Flag: "ingress-port", Addr: "192.0.2.7:10001"})
		}, 1, "a restart tries again"},
		{"a privileged port without the capability", func() error { return refused }, exitcode.Config, "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil {
				t.Fatal("bound")
			}
			if got := exitcode.Of(portFailure(err)); got != tc.want || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("exit %d for %v, want %d saying %q", got, err, tc.want, tc.says)
			}
		})
	}
}
