package bootstrap

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"runtime"
	"sync"
	"syscall"
	"time"
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

// DialEarly starts dialling the control plane; the first attempt takes
// the connection (see EarlyConn).
func (c *Client) DialEarly(ctx context.Context) {
	c.UseEarly(dialEarly(ctx, c.cpAddress, c.tr.TLSClientConfig))
}

// dialEarly dials cpAddress with base's verification; nil when the
// address is not an https URL (the attempt says why).
func dialEarly(ctx context.Context, cpAddress string, base *tls.Config) *EarlyConn {
	u, err := url.Parse(cpAddress)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil
	}
	// What the transport does with an https URL: verify the URL's host,
	// offer HTTP/2 and HTTP/1.1.
	tlsCfg := base.Clone()
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
