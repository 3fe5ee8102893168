package preflight

import (
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

func TestPorts(t *testing.T) {
	cases := []struct {
		name    string
		role    config.Role
		address string
		want    []Port
	}{
		{"egress on loopback", config.RoleEgress, "127.0.0.1",
			[]Port{{"egress-port", "127.0.0.1:10002"}}},
		{"ingress on loopback", config.RoleIngress, "127.0.0.1",
			[]Port{{"ingress-port", "127.0.0.1:10001"}}},
		{"combined on loopback", config.RoleCombined, "127.0.0.1",
			[]Port{{"ingress-port", "127.0.0.1:10001"}, {"egress-port", "127.0.0.1:10002"}}},
		// Off loopback the control plane adds a public admin listener.
		{"egress on a host IP", config.RoleEgress, "10.0.0.5",
			[]Port{{"egress-port", "10.0.0.5:10002"}, {"admin-port", "10.0.0.5:9901"}}},
		{"combined on a host IP", config.RoleCombined, "10.0.0.5",
			[]Port{{"ingress-port", "10.0.0.5:10001"}, {"egress-port", "10.0.0.5:10002"}, {"admin-port", "10.0.0.5:9901"}}},
		{"ingress on an IPv6 host IP", config.RoleIngress, "2001:db8::5",
			[]Port{{"ingress-port", "[2001:db8::5]:10001"}, {"admin-port", "[2001:db8::5]:9901"}}},
		{"every address", config.RoleIngress, "0.0.0.0",
			[]Port{{"ingress-port", "0.0.0.0:10001"}, {"admin-port", "0.0.0.0:9901"}}},
		// Only kuma-cp's own admin address counts as "no public listener".
		{"another loopback address", config.RoleEgress, "127.0.0.5",
			[]Port{{"egress-port", "127.0.0.5:10002"}, {"admin-port", "127.0.0.5:9901"}}},
		{"IPv6 loopback", config.RoleEgress, "::1",
			[]Port{{"egress-port", "[::1]:10002"}, {"admin-port", "[::1]:9901"}}},
		{"a host name", config.RoleEgress, "zp-1.zone.internal",
			[]Port{{"egress-port", "zp-1.zone.internal:10002"}, {"admin-port", "zp-1.zone.internal:9901"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Role: tc.role, Address: tc.address,
				IngressPort: 10001, EgressPort: 10002, AdminPort: 9901, ReadinessPort: 9902}
			if got := Ports(cfg); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadinessPortIsLoopbackWhateverTheAddress(t *testing.T) {
	cfg := &config.Config{Role: config.RoleEgress, Address: "10.0.0.5", ReadinessPort: 9902}
	if got, want := ReadinessPort(cfg), (Port{"readiness-port", "127.0.0.1:9902"}); got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// busyPort holds a loopback port for the test's lifetime.
func busyPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// freePort is a loopback port nobody listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestCheckFreeReportsEveryBusyPort(t *testing.T) {
	cases := []struct {
		name string
		busy []string // flags whose port is taken
	}{
		{"all free", nil},
		{"one busy", []string{"egress-port"}},
		{"the readiness port busy", []string{"readiness-port"}},
		{"every one busy", []string{"ingress-port", "egress-port", "readiness-port"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ports []Port
			for _, flag := range []string{"ingress-port", "egress-port", "readiness-port"} {
				addr := freePort(t)
				if slices.Contains(tc.busy, flag) {
					addr = busyPort(t)
				}
				ports = append(ports, Port{flag, addr})
			}
			err := CheckFree(ports...)
			if len(tc.busy) == 0 {
				if err != nil {
					t.Fatalf("free ports reported: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("busy %v not reported", tc.busy)
			}
			msg := err.Error()
			for _, p := range ports {
				named := strings.Contains(msg, "for --"+p.Flag+" ")
				if want := slices.Contains(tc.busy, p.Flag); named != want {
					t.Errorf("--%s (%s) reported: %v, want %v\n%s", p.Flag, p.Addr, named, want, msg)
				}
				if named && (!strings.Contains(msg, p.Addr) || !strings.Contains(msg, "set --"+p.Flag+" to another one")) {
					t.Errorf("--%s is reported without its address and hint:\n%s", p.Flag, msg)
				}
			}
			if !strings.Contains(msg, "address already in use") {
				t.Errorf("the cause is missing:\n%s", msg)
			}
		})
	}
}

// The check only probes: a free port is free again afterwards.
func TestCheckFreeReleasesWhatItBinds(t *testing.T) {
	p := Port{"egress-port", freePort(t)}
	for i := 0; i < 2; i++ {
		if err := CheckFree(p); err != nil {
			t.Fatalf("check %d: %v", i+1, err)
		}
	}
	l, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("port still held after the check: %v", err)
	}
	l.Close()
}

func TestPortErrorText(t *testing.T) {
	old := holderOf
	holderOf = func(addr string) string { return "it is held by pid 4242 (python3) of uid 1001 (alice)" }
	t.Cleanup(func() { holderOf = old })
	inUse := &net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10002},
		Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	notHere := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)}
	cases := []struct {
		name string
		port Port
		err  error
		want string
	}{
		{"a zone listener port in use", Port{"egress-port", "127.0.0.1:10002"}, inUse,
			"cannot bind 127.0.0.1:10002 for --egress-port (bind: address already in use): " +
				"free the port or set --egress-port to another one (and check --address is an IP of this host); " +
				"it is held by pid 4242 (python3) of uid 1001 (alice); a restart tries again, as the port may be freed"},
		{"an address not on this host", Port{"ingress-port", "10.9.9.9:10001"}, notHere,
			"cannot bind 10.9.9.9:10001 for --ingress-port (bind: cannot assign requested address): " +
				"free the port or set --ingress-port to another one (and check --address is an IP of this host); " +
				"a restart tries again, as the address may not be up yet (a VIP, an IPv6 address still tentative)"},
		// The readiness port is always loopback: --address is beside the point.
		{"the readiness port in use", Port{"readiness-port", "127.0.0.1:9902"}, inUse,
			"cannot bind 127.0.0.1:9902 for --readiness-port (bind: address already in use): " +
				"free the port or set --readiness-port to another one; " +
				"it is held by pid 4242 (python3) of uid 1001 (alice); a restart tries again, as the port may be freed"},
		{"an error that is not from the network", Port{"admin-port", "10.0.0.5:9901"}, errors.New("permission denied"),
			"cannot bind 10.0.0.5:9901 for --admin-port (permission denied): " +
				"free the port or set --admin-port to another one (and check --address is an IP of this host)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := PortError(tc.port, tc.err)
			if got := err.Error(); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if AddressNotUpYet(err) != (tc.err == notHere) {
				t.Errorf("AddressNotUpYet = %v: only an address not on this host may come up", AddressNotUpYet(err))
			}
		})
	}
}

// Envoy binds plain TCP; the agent's listeners and port checks do too,
// where Go would use Multipath TCP by default.
func TestListenIsPlainTCP(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	raw, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var proto int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		proto, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PROTOCOL)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if proto != syscall.IPPROTO_TCP {
		t.Fatalf("socket protocol %d, want TCP (%d)", proto, syscall.IPPROTO_TCP)
	}
}
