package bootstrap

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// earlyMaxAge bounds how long a connection dialled ahead may wait for the
// first request: the control plane may close an idle one.
const earlyMaxAge = 5 * time.Second

// EarlyConn is a TLS connection to the control plane opened before the
// first request needs it, so that the handshake overlaps the agent's own
// preflight and `envoy --version`. The first attempt takes it instead of
// dialling. A dial that failed, or a connection the control plane closed
// meanwhile, is dropped and the attempt dials as it always does, so an
// early connection never brings an error of its own. Nil is usable: there
// is no early connection.
type EarlyConn struct {
	addr   string // host:port, as the transport names it
	done   chan struct{}
	cancel context.CancelFunc

	mu     sync.Mutex
	conn   *tls.Conn
	at     time.Time
	closed bool // taken or closed: a late dial is closed at once
}

// DialEarly starts dialling cfg's control plane. It returns nil when the
// configuration gives nothing to dial with (a CA file that cannot be
// read or parsed): the fetcher reports that as it always has.
func DialEarly(ctx context.Context, cfg *config.Config) *EarlyConn {
	var caPEM []byte
	if cfg.CACertFile != "" {
		b, err := os.ReadFile(cfg.CACertFile)
		if err != nil {
			return nil
		}
		caPEM = b
	}
	return dialEarly(ctx, cfg.CPAddress, caPEM)
}

func dialEarly(ctx context.Context, cpAddress string, caPEM []byte) *EarlyConn {
	u, err := url.Parse(cpAddress)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil
	}
	tlsCfg, err := clientTLS(caPEM)
	if err != nil {
		return nil
	}
	// What the transport does with an https URL: verify the URL's host,
	// offer HTTP/2 and HTTP/1.1.
	tlsCfg.ServerName = u.Hostname()
	tlsCfg.NextProtos = []string{"h2", "http/1.1"}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	e := &EarlyConn{addr: net.JoinHostPort(u.Hostname(), port), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(e.done)
		defer cancel()
		d := tls.Dialer{Config: tlsCfg}
		c, err := d.DialContext(ctx, "tcp", e.addr)
		if err != nil {
			return // the attempt dials again and says why
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.closed {
			c.Close()
			return
		}
		e.conn, e.at = c.(*tls.Conn), time.Now()
	}()
	// Let the dial send its ClientHello now: otherwise it waits for a
	// second thread to start or for the caller to block, about 1 ms at
	// start-up, while the caller does the preflight.
	runtime.Gosched()
	return e
}

// take hands over the connection for addr once, waiting for the dial
// still under way; nil means dial anew.
func (e *EarlyConn) take(ctx context.Context, addr string) net.Conn {
	if e == nil || addr != e.addr {
		return nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil
	}
	e.mu.Lock()
	c := e.conn
	e.conn, e.closed = nil, true
	at := e.at
	e.mu.Unlock()
	if c == nil {
		return nil
	}
	if time.Since(at) > earlyMaxAge || peerClosed(c) {
		c.Close()
		return nil
	}
	return c
}

// Close drops a connection nobody took and stops a dial under way.
func (e *EarlyConn) Close() {
	if e == nil {
		return
	}
	e.cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		e.conn.Close()
		e.conn = nil
	}
	e.closed = true
}

// peerClosed peeks at the socket without consuming anything: end of
// stream or an error means the control plane has closed it.
func peerClosed(c *tls.Conn) bool {
	sc, ok := c.NetConn().(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || (err != nil && err != syscall.EAGAIN && err != syscall.EINTR)
		return true
	})
	return closed || err != nil
}
