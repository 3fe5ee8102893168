package e2e

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// legacyProxy stands in for a legacy zone proxy run by kuma-dp: it takes
// a connection whose ClientHello names sni (holding it open, as Envoy's
// tcp_proxy does) and closes any other.
type legacyProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	stopped bool
}

func startLegacyProxy(t *testing.T, sni string) *legacyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &legacyProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go l.serve(c, sni)
		}
	}()
	t.Cleanup(l.stop)
	return l
}

var errHelloRead = errors.New("ClientHello read")

// serve reads the ClientHello (nothing is written back) and keeps the
// connection only when it names sni.
func (l *legacyProxy) serve(c net.Conn, sni string) {
	var named string
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_ = tls.Server(readOnly{c}, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		named = h.ServerName
		return nil, errHelloRead
	}}).Handshake()
	if named != sni {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		c.Close()
		return
	}
	l.conns = append(l.conns, c)
}

// readOnly drops what the TLS server would write (its alert).
type readOnly struct{ net.Conn }

func (readOnly) Write(b []byte) (int, error) { return len(b), nil }

func (l *legacyProxy) addr() (string, uint32) {
	a := l.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), uint32(a.Port)
}

// stop is the legacy kuma-dp gone: the port refuses, held connections close.
func (l *legacyProxy) stop() {
	l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns, l.stopped = nil, true
}

// The destinations a migration sidecar samples.
const (
	toExternal = "egress"  // the MeshExternalService, through an egress
	toRemote   = "ingress" // the remote zone's MeshService, through its ingress
)

type migrationSample struct {
	at     time.Time
	to     string
	via    string
	target string
	err    error
}

// migrationSidecar does what a sidecar of another zone would: over and
// over, it takes what the control plane sends it now (SidecarView) for
// each destination and opens a TLS connection to that endpoint with that
// SNI. A sample is usable when the connection is held open: a refused
// port, a closed connection (no filter chain for the SNI) or no endpoint
// at all is not.
type migrationSidecar struct {
	stop, done chan struct{}
	once       sync.Once
	mu         sync.Mutex
	samples    []migrationSample
}

func startMigrationSidecar(t *testing.T, cp *controlplane.Server, mesh string, to ...string) *migrationSidecar {
	s := &migrationSidecar{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			default:
			}
			view := cp.SidecarView(mesh, controlplane.LocalZone)
			for _, dest := range to {
				routes := view.Egress
				if dest == toRemote {
					routes = view.Ingress
				}
				sample := migrationSample{at: time.Now(), to: dest, err: errors.New("no endpoint")}
				if len(routes) > 0 {
					r := routes[i%len(routes)]
					sample.via, sample.target = r.Via, net.JoinHostPort(r.Address, strconv.Itoa(int(r.Port)))
					sample.err = heldOpen(sample.target, r.SNI)
				}
				s.mu.Lock()
				s.samples = append(s.samples, sample)
				s.mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond) // pacing, not a wait for a condition
		}
	}()
	t.Cleanup(s.finish)
	return s
}

// heldOpen sends a ClientHello naming sni and says whether the
// connection stays open.
func heldOpen(addr, sni string) error {
	c, err := harness.DialTLSHello(addr, sni)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return errors.New("closed: no filter chain for " + sni)
	}
	return fmt.Errorf("answered: %v", err)
}

func (s *migrationSidecar) finish() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// mark is where the next phase's samples start.
func (s *migrationSidecar) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.samples)
}

// count is how many samples since from went to dest via via and whether
// they were usable.
func (s *migrationSidecar) count(from int, dest, via string, usable bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.samples[from:] {
		if x.to == dest && x.via == via && (x.err == nil) == usable {
			n++
		}
	}
	return n
}

// await waits for n usable samples to dest via via, from now on.
func (s *migrationSidecar) await(t *testing.T, dest, via string, n int) {
	t.Helper()
	from := s.mark()
	deadline := time.Now().Add(promptly)
	for s.count(from, dest, via, true) < n {
		if time.Now().After(deadline) {
			bad := s.unusable(from)
			t.Fatalf("no %d usable samples to the %s via %s in %s; %d unusable, the last: %v", n, dest, via, promptly, len(bad), bad[max(0, len(bad)-3):])
		}
		time.Sleep(20 * time.Millisecond) // polling the samples taken meanwhile
	}
}

// unusable lists the samples since from that had no usable endpoint.
func (s *migrationSidecar) unusable(from int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, x := range s.samples[from:] {
		if x.err != nil {
			out = append(out, fmt.Sprintf("%s %s via %s %s: %v", x.at.Format("15:04:05.000"), x.to, x.via, x.target, x.err))
		}
	}
	return out
}

// allUsable stops the sidecar and fails the test if a sample since from
// had no usable endpoint.
func (s *migrationSidecar) allUsable(t *testing.T, from int, phase string) {
	t.Helper()
	s.finish()
	if bad := s.unusable(from); len(bad) > 0 {
		t.Fatalf("%s: %d samples without a usable endpoint, the first: %v", phase, len(bad), bad[:min(len(bad), 10)])
	}
}
