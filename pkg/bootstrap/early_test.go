package bootstrap

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const okBody = `{"bootstrap":"bm9kZToge30K"}`

type countingListener struct {
	net.Listener
	n          *atomic.Int32
	closeFirst bool
}

func (l *countingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.n.Add(1) == 1 && l.closeFirst {
			c.Close()
			continue
		}
		return c, nil
	}
}

func fetchOK(t *testing.T, c *Client) {
	t.Helper()
	doc, err := c.Fetch(context.Background(), &Request{Mesh: "default", Name: "zp"})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if want, _ := base64.StdEncoding.DecodeString("bm9kZToge30K"); string(doc) != string(want) {
		t.Fatalf("bootstrap %q", doc)
	}
}

func newStartedServer(t *testing.T, closeFirst bool) (string, []byte, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(respond(200, okBody))
	n := &atomic.Int32{}
	srv.Listener = &countingListener{Listener: srv.Listener, n: n, closeFirst: closeFirst}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, caOf(srv), n
}

func tlsFor(t *testing.T, ca []byte) *tls.Config {
	t.Helper()
	cfg, err := clientTLS(ca)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func caOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// The first request goes over the connection dialled ahead, as HTTP/1.1
// (kuma-dp's protocol for it), and the control plane sees no other
// connection for it; later attempts go through the transport.
func TestEarlyConnectionCarriesTheFirstRequest(t *testing.T) {
	var protos []string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		mu.Unlock()
		respond(200, okBody)(w, r)
	}))
	conns := &atomic.Int32{}
	srv.Listener = &countingListener{Listener: srv.Listener, n: conns}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url, ca := srv.URL, caOf(srv)
	e := dialEarly(context.Background(), url, tlsFor(t, ca))
	defer e.Close()
	c, err := NewClient(url, ca)
	if err != nil {
		t.Fatal(err)
	}
	c.UseEarly(e)
	fetchOK(t, c)
	if n := conns.Load(); n != 1 {
		t.Errorf("the control plane accepted %d connections for the first request, want 1 (the early one)", n)
	}
	fetchOK(t, c)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"HTTP/1.1", "HTTP/2.0"}; !slices.Equal(protos, want) {
		t.Errorf("requests came as %v, want %v (the early connection, then the transport's)", protos, want)
	}
}

// gatedListener holds the server's side of the handshake until the gate
// opens.
type gatedListener struct {
	net.Listener
	gate chan struct{}
}

func (l gatedListener) Accept() (net.Conn, error) {
	<-l.gate
	return l.Listener.Accept()
}

// A request ready before the handshake ends leaves from the dial itself,
// the moment the handshake is over; one ready after goes out at once.
// Both get their answer over the one early connection.
func TestEarlyRequestBeforeAndAfterTheHandshake(t *testing.T) {
	for _, readyFirst := range []bool{true, false} {
		gate := make(chan struct{})
		srv := httptest.NewUnstartedServer(respond(200, okBody))
		conns := &atomic.Int32{}
		srv.Listener = gatedListener{Listener: &countingListener{Listener: srv.Listener, n: conns}, gate: gate}
		srv.StartTLS()
		e := dialEarly(context.Background(), srv.URL, tlsFor(t, caOf(srv)))
		c, _ := NewClient(srv.URL, caOf(srv))
		c.UseEarly(e)
		if !readyFirst {
			close(gate)
			<-e.done
		}
		fetched := make(chan error, 1)
		go func() {
			_, err := c.Fetch(context.Background(), &Request{Mesh: "default", Name: "zp"})
			fetched <- err
		}()
		if readyFirst {
			testutil.Eventually(t, 10*time.Second, "the request waiting for the handshake", func() bool {
				e.mu.Lock()
				defer e.mu.Unlock()
				return e.waiting != nil
			})
			close(gate)
		}
		if err := <-fetched; err != nil {
			t.Errorf("request ready first %v: %v", readyFirst, err)
		}
		if n := conns.Load(); n != 1 {
			t.Errorf("request ready first %v: %d connections, want 1", readyFirst, n)
		}
		e.Close()
		srv.Close()
	}
}

// A dial that fails ahead is made again by the attempt, which succeeds
// when the control plane now answers.
func TestEarlyDialThatFailedIsMadeAgain(t *testing.T) {
	url, ca, conns := newStartedServer(t, true)
	e := dialEarly(context.Background(), url, tlsFor(t, ca))
	defer e.Close()
	<-e.done // the early dial met the closed connection
	c, _ := NewClient(url, ca)
	c.UseEarly(e)
	fetchOK(t, c)
	if n := conns.Load(); n != 2 {
		t.Errorf("the control plane accepted %d connections, want 2 (the failed early one, then the attempt's)", n)
	}
}

// A connection the control plane closed after the handshake, before the
// request, is not a failed attempt.
func TestEarlyConnectionClosedByTheControlPlane(t *testing.T) {
	var mu sync.Mutex
	var first net.Conn
	accepted := make(chan struct{})
	srv := httptest.NewUnstartedServer(respond(200, okBody))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the closed handshake
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		if s == http.StateNew && first == nil {
			first = c
			close(accepted)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url, ca := srv.URL, caOf(srv)
	e := dialEarly(context.Background(), url, tlsFor(t, ca))
	defer e.Close()
	<-e.done
	<-accepted
	mu.Lock()
	first.Close()
	mu.Unlock()
	c, _ := NewClient(url, ca)
	c.UseEarly(e)
	fetchOK(t, c)
}

// A connection dialled ahead to another address is never used.
func TestEarlyConnectionIsForItsAddressOnly(t *testing.T) {
	url, ca, conns := newStartedServer(t, false)
	other, _, otherConns := newStartedServer(t, false)
	e := dialEarly(context.Background(), other, tlsFor(t, ca))
	defer e.Close()
	<-e.done
	c, _ := NewClient(url, ca)
	c.UseEarly(e)
	fetchOK(t, c)
	if conns.Load() != 1 || otherConns.Load() != 1 {
		t.Errorf("connections: %d to the control plane, %d to the other address; want 1 and 1 (never used)", conns.Load(), otherConns.Load())
	}
}
