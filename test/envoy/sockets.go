package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"golang.org/x/sys/unix"
)

// boundSocket is a listener address's sockets, as Envoy's
// ListenSocketFactoryImpl makes them: bound when the listener is created,
// listening only once the listener starts (doFinalPreWorkerInit). Until
// then the kernel refuses connections to the port, or hands them to
// another process's listening socket of the same SO_REUSEPORT group.
type boundSocket struct {
	key    string   // identifies the bind so an update can keep the socket
	addr   net.Addr // the bound address, port 0 resolved
	packet net.PacketConn

	mu      sync.Mutex
	fds     []int          // bound, not listening yet
	tcp     []net.Listener // listening: one per worker with reuse_port, else one
	closed  bool
	serving bool
}

// backlogSomaxconn is ENVOY_TCP_BACKLOG_SIZE on Linux: the kernel caps -1
// to net.core.somaxconn.
const backlogSomaxconn = -1

// listen calls listen() on every socket (once; later calls are no-ops) and
// wraps them for Go, as doFinalPreWorkerInit does before the workers use them.
func (b *boundSocket) listen(backlog int) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.fds) == 0 {
		return nil
	}
	for _, fd := range b.fds {
		if err := unix.Listen(fd, backlog); err != nil {
			var errno syscall.Errno
			errors.As(err, &errno)
			return fmt.Errorf("cannot listen() errno=%d", int(errno))
		}
	}
	for _, fd := range b.fds {
		f := os.NewFile(uintptr(fd), b.key)
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("cannot listen() on %s: %w", b.key, err)
		}
		b.tcp = append(b.tcp, ln)
	}
	b.fds = nil
	return nil
}

// listeners returns the listening sockets once, for the accept loops.
func (b *boundSocket) listenersToServe() []net.Listener {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.serving || b.closed {
		return nil
	}
	b.serving = true
	return b.tcp
}

func (b *boundSocket) close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, fd := range b.fds {
		unix.Close(fd)
	}
	b.fds = nil
	for _, ln := range b.tcp {
		ln.Close()
	}
	if b.packet != nil {
		b.packet.Close()
	}
}

// bindAddress binds like Envoy's ListenSocketImpl: pipes are unlinked first
// and chmod-ed after bind; TCP gets SO_REUSEADDR and, with reusePort,
// SO_REUSEPORT on each of sockets sockets (one per worker; pipes always
// get one). Nothing listens yet: see listen.
func bindAddress(a *corev3.Address, reusePort bool, sockets int) (*boundSocket, error) {
	switch t := a.GetAddress().(type) {
	case *corev3.Address_Pipe:
		return bindPipe(t.Pipe)
	case *corev3.Address_SocketAddress:
		sa := t.SocketAddress
		ip, err := netip.ParseAddr(sa.GetAddress())
		if err != nil {
			return nil, fmt.Errorf("malformed IP address: %s", sa.GetAddress())
		}
		ap := netip.AddrPortFrom(ip, uint16(sa.GetPortValue()))
		if sa.GetProtocol() == corev3.SocketAddress_UDP {
			return bindUDP(ap, reusePort)
		}
		if !reusePort || sockets < 1 {
			sockets = 1
		}
		b := &boundSocket{key: "tcp:" + ap.String()}
		for range sockets {
			fd, bound, err := bindTCP(ap, reusePort, sa.GetIpv4Compat())
			if err != nil {
				b.close()
				return nil, fmt.Errorf("cannot bind '%s': %s", ap, strerror(err))
			}
			b.fds = append(b.fds, fd)
			// Envoy binds the first socket, then the others to its port.
			ap, b.addr = bound.AddrPort(), bound
		}
		return b, nil
	case *corev3.Address_EnvoyInternalAddress:
		return nil, nil
	}
	return nil, errors.New("Address must be set: ")
}

func bindTCP(ap netip.AddrPort, reusePort, ipv4Compat bool) (int, *net.TCPAddr, error) {
	family := unix.AF_INET
	if ap.Addr().Is6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	fail := func(err error) (int, *net.TCPAddr, error) {
		unix.Close(fd)
		return -1, nil, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail(err)
	}
	if reusePort {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail(err)
		}
	}
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if family == unix.AF_INET6 {
		v6only := 1
		if ipv4Compat {
			v6only = 0
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only); err != nil {
			return fail(err)
		}
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail(err)
	}
	local, err := unix.Getsockname(fd)
	if err != nil {
		return fail(err)
	}
	var addr *net.TCPAddr
	switch l := local.(type) {
	case *unix.SockaddrInet4:
		addr = &net.TCPAddr{IP: net.IP(l.Addr[:]), Port: l.Port}
	case *unix.SockaddrInet6:
		addr = &net.TCPAddr{IP: net.IP(l.Addr[:]), Port: l.Port}
	}
	return fd, addr, nil
}

func bindPipe(p *corev3.Pipe) (*boundSocket, error) {
	if err := checkPipePath(p); err != nil {
		return nil, err
	}
	path := p.GetPath()
	abstract := strings.HasPrefix(path, "@")
	if !abstract {
		os.Remove(path)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		// x/sys/unix turns a leading '@' into the abstract namespace's NUL.
		if err = unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot bind '%s': %s", path, strerror(err))
	}
	// Envoy leaves the socket file behind when it closes; so does a
	// listener made from a file.
	b := &boundSocket{key: "unix:" + path, addr: &net.UnixAddr{Name: path, Net: "unix"}, fds: []int{fd}}
	if p.GetMode() != 0 && !abstract {
		if err := os.Chmod(path, os.FileMode(p.GetMode())); err != nil {
			b.close()
			return nil, fmt.Errorf("Failed to create socket with mode %d: %s", p.GetMode(), strerror(err))
		}
	}
	return b, nil
}

// bindUDP binds one datagram socket; datagram sockets have no listen().
func bindUDP(ap netip.AddrPort, reusePort bool) (*boundSocket, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if reusePort {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	network := "udp4"
	if ap.Addr().Is6() {
		network = "udp6"
	}
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, fmt.Errorf("cannot bind '%s': %s", ap, strerror(err))
	}
	return &boundSocket{key: "udp:" + ap.String(), addr: pc.LocalAddr(), packet: pc}, nil
}
