package controlplane

import (
	"net"
	"sync"
)

// hangGate is the Hang fault: while it is shut, the DP server behaves like
// a kuma-cp stopped with SIGSTOP. The kernel still completes TCP
// handshakes into the listen backlog, but the process reads nothing,
// writes nothing and runs no timers, so a TLS handshake never completes
// and an open connection gets no bytes. Nothing fails; it all carries on
// when the gate opens again.
type hangGate struct {
	mu      sync.Mutex
	release chan struct{} // nil while open; closed when the gate opens
}

// set shuts (true) or opens (false) the gate.
func (g *hangGate) set(hang bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case hang && g.release == nil:
		g.release = make(chan struct{})
	case !hang && g.release != nil:
		close(g.release)
		g.release = nil
	}
}

func (g *hangGate) shut() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.release
}

// wait returns once the gate is open, or false as soon as one of stop is
// closed.
func (g *hangGate) wait(stop ...<-chan struct{}) bool {
	for {
		release := g.shut()
		if release == nil {
			return true
		}
		// At most three stop channels are ever passed.
		var s0, s1, s2 <-chan struct{}
		switch len(stop) {
		case 3:
			s2 = stop[2]
			fallthrough
		case 2:
			s1 = stop[1]
			fallthrough
		case 1:
			s0 = stop[0]
		}
		select {
		case <-release:
		case <-s0:
			return false
		case <-s1:
			return false
		case <-s2:
			return false
		}
	}
}

// hangListener stops calling Accept while the gate is shut (connections
// wait, handshaken, in the kernel's backlog) and holds a connection the
// kernel handed over while it was shut.
//
// kill is closed when the server drops every connection (Restart, Close):
// a killed process holds nothing, so waiters give up then.
type hangListener struct {
	net.Listener
	gate      *hangGate
	kill      <-chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func newHangListener(ln net.Listener, gate *hangGate, kill <-chan struct{}) *hangListener {
	return &hangListener{Listener: ln, gate: gate, kill: kill, closed: make(chan struct{})}
}

func (l *hangListener) Accept() (net.Conn, error) {
	if !l.gate.wait(l.closed, l.kill) {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	hc := &hangConn{Conn: c, gate: l.gate, kill: l.kill, closed: make(chan struct{})}
	if !l.gate.wait(l.closed, l.kill) {
		_ = hc.Close()
		return nil, net.ErrClosed
	}
	return hc, nil
}

func (l *hangListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// hangConn blocks reads and writes while the gate is shut. A read that
// was already waiting in the kernel keeps what it got until the gate
// opens; deadlines that pass meanwhile take effect only then, like timers
// in a stopped process.
type hangConn struct {
	net.Conn
	gate      *hangGate
	kill      <-chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *hangConn) Read(p []byte) (int, error) {
	if !c.gate.wait(c.closed, c.kill) {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p)
	if !c.gate.wait(c.closed, c.kill) {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *hangConn) Write(p []byte) (int, error) {
	if !c.gate.wait(c.closed, c.kill) {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *hangConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
