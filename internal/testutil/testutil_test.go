package testutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fatalRecorder stands in for a test that fails.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times", n)
	}

	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(r, 50*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if r.msg != "timed out after 50ms waiting for never" {
		t.Errorf("failed with %q", r.msg)
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Errorf("got %d bytes", len(got))
	}
}

func TestCertPEM(t *testing.T) {
	notAfter := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	blk, _ := pem.Decode(CertPEM(t, notAfter))
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !c.NotAfter.Equal(notAfter) || !c.NotBefore.Equal(notAfter.Add(-48*time.Hour)) {
		t.Errorf("valid %s to %s", c.NotBefore, c.NotAfter)
	}
}

func TestClosedAddr(t *testing.T) {
	addr := ClosedAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("address %s", addr)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on %s", addr)
	}
}

func TestAccepts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if !Accepts(addr) {
		t.Errorf("a listener on %s does not accept", addr)
	}
	ln.Close()
	if Accepts(addr) {
		t.Errorf("%s accepts after the close", addr)
	}
	if port := FreePort(t); Accepts(net.JoinHostPort("127.0.0.1", fmt.Sprint(port))) {
		t.Errorf("free port %d accepts", port)
	}
}

func TestNewPKI(t *testing.T) {
	p := NewPKI(t, []string{"cp.example"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if _, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Fatalf("CertPEM and KeyPEM: %v", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{p.Cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.CAPEM)
	for name, ok := range map[string]bool{"cp.example": true, "127.0.0.1": true, "other.example": false} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: name})
		if err == nil {
			c.Close()
		}
		if (err == nil) != ok {
			t.Errorf("server name %s: %v", name, err)
		}
	}
}

func TestUnixHTTP(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Path) })}
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := UnixHTTP(sock, 5*time.Second).Get("http://any/ready")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "/ready" || !resp.Close {
		t.Errorf("body %q, connection kept %t", b, !resp.Close)
	}
}

func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "%s %s", r.Method, b)
	}))
	defer srv.Close()
	if code, body := HTTP(t, http.MethodPut, srv.URL, "payload"); code != http.StatusTeapot || body != "PUT payload" {
		t.Errorf("HTTP = %d %q, want 418 %q", code, body, "PUT payload")
	}
}
