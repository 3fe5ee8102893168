package testutil

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
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
