package bootstrap

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
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
	url, ca, e := startAndDialAhead(t, srv)
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

// An answer that does not come in time is the attempt's failure: the
// request is not sent a second time to a control plane that is already
// slow, nor does the attempt wait twice as long.
func TestSlowAnswerOnTheEarlyConnectionIsNotSentAgain(t *testing.T) {
	var requests atomic.Int32
	release := make(chan struct{})
	srv, ca := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	e := dialEarly(context.Background(), srv.URL, tlsFor(t, ca))
	defer e.Close()
	c, _ := NewClient(srv.URL, ca)
	c.http.Timeout = 100 * time.Millisecond
	c.UseEarly(e)
	_, err := c.Fetch(context.Background(), &Request{Mesh: "default", Name: "zp"})
	var be *Error
	if !errors.As(err, &be) || be.Kind != Retryable {
		t.Fatalf("err %v, want a retryable failure", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the control plane got the request %d times, want once", n)
	}
}

// A redirect is not followed: the request carries the token, and the
// redirect may point at another host or at plain HTTP.
func TestRedirectIsNotFollowed(t *testing.T) {
	var leaked atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { leaked.Add(1) }))
	t.Cleanup(plain.Close)
	srv, ca := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Redirect(w, &http.Request{}, plain.URL+"/bootstrap", http.StatusPermanentRedirect)
	})
	for _, early := range []bool{true, false} {
		c, _ := NewClient(srv.URL, ca)
		if early {
			e := dialEarly(context.Background(), srv.URL, tlsFor(t, ca))
			defer e.Close()
			c.UseEarly(e)
		}
		_, err := c.Fetch(context.Background(), &Request{Mesh: "default", Name: "zp", DataplaneToken: "secret-token"})
		var be *Error
		if !errors.As(err, &be) || be.Kind != Retryable || be.Status != 308 || !strings.Contains(be.Msg, "does not follow redirects") {
			t.Errorf("early %v: err %v, want a retryable 308 saying the redirect is not followed", early, err)
		}
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the redirect's target got %d requests", n)
	}
}

// Something a proxy sent unasked on the connection dialled ahead (a 408
// once its header timeout passed, then a close) is not taken for the
// control plane's answer: the attempt dials anew.
func TestEarlyConnectionAnsweredUnaskedIsDropped(t *testing.T) {
	srv := httptest.NewUnstartedServer(respond(200, okBody))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	timedOut := make(chan struct{})
	srv.Listener = &proxyTimeoutListener{Listener: srv.Listener, srv: srv, done: timedOut}
	url, ca, e := startAndDialAhead(t, srv)
	<-timedOut
	awaitReadable(t, e)
	c, _ := NewClient(url, ca)
	c.UseEarly(e)
	fetchOK(t, c)
}

// proxyTimeoutListener answers its first connection with a 408 and closes
// it, as a proxy whose header timeout passed does.
type proxyTimeoutListener struct {
	net.Listener
	srv   *httptest.Server
	done  chan struct{}
	first sync.Once
}

func (l *proxyTimeoutListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		handled := false
		l.first.Do(func() {
			handled = true
			go func() {
				defer close(l.done)
				tc := tls.Server(c, l.srv.TLS)
				if tc.Handshake() == nil {
					io.WriteString(tc, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
				}
				tc.Close()
			}()
		})
		if !handled {
			return c, nil
		}
	}
}

// awaitReadable waits until bytes wait on the early connection's socket.
func awaitReadable(t *testing.T, e *EarlyConn) {
	t.Helper()
	e.mu.Lock()
	raw := e.conn.NetConn().(*net.TCPConn)
	e.mu.Unlock()
	rc, err := raw.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		_ = rc.Control(func(fd uintptr) {
			var b [1]byte
			n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		})
		if n > 0 {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("nothing arrived on the early connection")
}

// A handshake that hangs is the attempt's failure, once: the attempt does
// not dial again and wait as long a second time.
func TestHungEarlyHandshakeIsNotDialledAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			t.Cleanup(func() { c.Close() }) // never answers the ClientHello
		}
	}()
	url := "https://" + ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	e := dialEarly(ctx, url, tlsFor(t, nil))
	defer e.Close()
	c, _ := NewClient(url, nil)
	c.UseEarly(e)
	_, err = c.Fetch(context.Background(), &Request{Mesh: "default", Name: "zp"})
	var be *Error
	if !errors.As(err, &be) || be.Kind != Retryable {
		t.Fatalf("err %v, want a retryable failure", err)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections, want the early one only", n)
	}
}

// startAndDialAhead starts srv with TLS and dials it ahead, as run does,
// until the dial is over.
func startAndDialAhead(t *testing.T, srv *httptest.Server) (string, []byte, *EarlyConn) {
	t.Helper()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url, ca := srv.URL, caOf(srv)
	e := dialEarly(context.Background(), url, tlsFor(t, ca))
	t.Cleanup(e.Close)
	<-e.done
	return url, ca, e
}
