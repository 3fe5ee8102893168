package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
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
// preflight and `envoy --version`. The first attempt's request goes over
// it as HTTP/1.1 (as kuma-dp's does), written by the dial itself the
// moment the handshake ends when the request is ready first. A dial that
// failed, or a connection the control plane closed meanwhile, is dropped
// and the attempt dials as it always does, so an early connection never
// brings an error of its own. Nil is usable: there is no early connection.
type EarlyConn struct {
	addr   string // host:port of the control plane (hostPort)
	done   chan struct{}
	cancel context.CancelFunc

	mu      sync.Mutex
	conn    *tls.Conn
	at      time.Time
	err     error         // why the dial failed
	closed  bool          // taken or closed: a late dial is closed at once
	waiting *earlyRequest // a request ready before the handshake ended
}

// earlyRequest is a serialised request waiting for the handshake.
type earlyRequest struct {
	raw  []byte
	sent chan *tls.Conn // the connection it was written to; nil: dial anew
}

// DialAhead makes cfg's client and starts dialling the control plane.
func DialAhead(ctx context.Context, cfg *config.Config) (*Client, error) {
	c, err := NewClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c.DialEarly(ctx)
	return c, nil
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
	// Verify the URL's host, as the transport does; offer only the first
	// request's protocol.
	tlsCfg := base.Clone()
	tlsCfg.ServerName = u.Hostname()
	tlsCfg.NextProtos = []string{"http/1.1"}
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	e := &EarlyConn{addr: hostPort(u), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(e.done)
		defer cancel()
		d := tls.Dialer{Config: tlsCfg}
		c, err := d.DialContext(ctx, "tcp", e.addr)
		if err != nil {
			e.mu.Lock()
			e.err = err
			e.mu.Unlock()
			return // the attempt dials again and says why, unless it hung
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			c.Close()
			return
		}
		w := e.waiting
		if w == nil {
			e.conn, e.at = c.(*tls.Conn), time.Now()
			e.mu.Unlock()
			return
		}
		// The request is ready: it leaves now, without waking its caller.
		e.waiting, e.closed = nil, true
		e.mu.Unlock()
		w.sent <- deliver(c.(*tls.Conn), w.raw)
	}()
	// Let the dial send its ClientHello now: otherwise it waits for a
	// second thread to start or for the caller to block, about 1 ms at
	// start-up, while the caller does the preflight.
	runtime.Gosched()
	return e
}

// send writes raw, the first request for addr, over the connection: at
// once if the handshake is over, else from the dial when it ends. It
// returns the connection the request went out on, or nil and why the dial
// failed, if it did: dial anew.
func (e *EarlyConn) send(ctx context.Context, addr string, raw []byte) (*tls.Conn, error) {
	if e == nil || addr != e.addr {
		return nil, nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, nil
	}
	if c := e.conn; c != nil {
		e.conn, e.closed = nil, true
		at := e.at
		e.mu.Unlock()
		if time.Since(at) > earlyMaxAge || peerClosed(c) {
			c.Close()
			return nil, nil
		}
		return deliver(c, raw), nil
	}
	w := &earlyRequest{raw: raw, sent: make(chan *tls.Conn, 1)}
	e.waiting = w
	e.mu.Unlock()
	select {
	case c := <-w.sent:
		return c, nil
	case <-e.done:
		select {
		case c := <-w.sent:
			return c, nil
		default:
			e.mu.Lock()
			defer e.mu.Unlock()
			return nil, e.err
		}
	case <-ctx.Done():
		e.mu.Lock()
		taken := e.waiting != w
		e.waiting, e.closed = nil, true
		e.mu.Unlock()
		if taken { // the dial is writing it: close what it hands over
			go func() {
				if c := <-w.sent; c != nil {
					c.Close()
				}
			}()
		}
		return nil, nil
	}
}

// deliver writes raw on c and returns c, or closes it and returns nil.
func deliver(c *tls.Conn, raw []byte) *tls.Conn {
	if _, err := c.Write(raw); err != nil {
		c.Close()
		return nil
	}
	return c
}

// hostPort is u's host and port, 443 when it names none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
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

// isTimeout: the network or a deadline gave up waiting.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
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
