package accesslog

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// ceiling is generous: another test suite may share the two cores.
const ceiling = 30 * time.Second

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, ceiling, what, cond)
}

// testOptions retry fast so a restarted sink is found quickly.
func testOptions(t *testing.T) Options {
	return Options{
		Path:       filepath.Join(t.TempDir(), "kuma-al-zp-egress-1-payments.sock"),
		BackoffMin: 10 * time.Millisecond,
		BackoffMax: 50 * time.Millisecond,
	}
}

// startStreamer fails the test if the streamer logs an error: none of the
// tests feed it anything it should call one.
func startStreamer(t *testing.T, opts Options) *Streamer {
	t.Helper()
	core, logs := observer.New(zapcore.ErrorLevel)
	if opts.Log == nil {
		opts.Log = zap.New(core)
	}
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		for _, e := range logs.All() {
			t.Errorf("logged an error: %s %v", e.Message, e.ContextMap())
		}
	})
	return s
}

// metric is the value of one sample of s's metrics as a scrape shows it,
// "" if absent.
func metric(s *Streamer, sample string) string {
	name, _, _ := strings.Cut(sample, "{")
	page, err := promtest.CollectAndFormat(s.Metrics(), expfmt.TypeTextPlain, name)
	if err != nil {
		panic(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return v
		}
	}
	return ""
}

// envoyWriter opens the FIFO as Envoy would, without waiting: ENXIO here
// means nobody holds the read end.
type envoyWriter struct {
	t    *testing.T
	path string
	f    *os.File
}

func openAsEnvoy(t *testing.T, path string) *envoyWriter {
	t.Helper()
	w := &envoyWriter{t: t, path: path}
	w.reopen()
	t.Cleanup(func() { w.f.Close() })
	return w
}

func (w *envoyWriter) reopen() {
	w.t.Helper()
	if w.f != nil {
		w.f.Close()
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0)
	if err != nil {
		w.t.Fatalf("opening the FIFO as Envoy: %v", err)
	}
	w.f = f
}

// write fails the test instead of blocking past the ceiling.
func (w *envoyWriter) write(s string) {
	w.t.Helper()
	w.f.SetWriteDeadline(time.Now().Add(ceiling))
	if _, err := w.f.WriteString(s); err != nil {
		w.t.Fatalf("writing to the FIFO: %v", err)
	}
}

// awaitRead waits until the streamer has taken everything from the pipe,
// so the next write lands in a separate read.
func (w *envoyWriter) awaitRead() {
	w.t.Helper()
	rc, err := w.f.SyscallConn()
	if err != nil {
		w.t.Fatal(err)
	}
	await(w.t, "the streamer to read the pipe empty", func() bool {
		var n int32
		var errno syscall.Errno
		rc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		})
		return errno == 0 && n == 0
	})
}

// sink is a TCP access-log backend on 127.0.0.1 recording what it receives.
type sink struct {
	t     *testing.T
	ln    net.Listener
	addr  string
	read  bool
	mu    sync.Mutex
	got   bytes.Buffer
	conns []net.Conn
	ended int // connections closed, by the agent or kill
}

func startSink(t *testing.T, addr string) *sink {
	t.Helper()
	k := &sink{t: t, read: true}
	k.listen(addr, net.ListenConfig{})
	return k
}

// startStalledSink accepts connections and never reads them; small socket
// buffers make it fill after a few lines.
func startStalledSink(t *testing.T) *sink {
	t.Helper()
	k := &sink{t: t}
	k.listen("127.0.0.1:0", net.ListenConfig{Control: smallBuffer(syscall.SO_RCVBUF)})
	return k
}

func smallBuffer(opt int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) })
		if err != nil {
			return err
		}
		return serr
	}
}

func (k *sink) listen(addr string, lc net.ListenConfig) {
	k.t.Helper()
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		k.t.Fatalf("sink listen %s: %v", addr, err)
	}
	k.ln, k.addr = ln, ln.Addr().String()
	k.t.Cleanup(k.kill)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			k.mu.Lock()
			k.conns = append(k.conns, c)
			k.mu.Unlock()
			if k.read {
				go k.record(c)
			}
		}
	}()
}

func (k *sink) record(c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		k.mu.Lock()
		k.got.Write(buf[:n])
		if err != nil {
			k.ended++
		}
		k.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (k *sink) text() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.got.String()
}

func (k *sink) endedConns() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ended
}

func (k *sink) awaitText(want string) {
	k.t.Helper()
	await(k.t, "sink "+k.addr+" to receive "+want, func() bool { return k.text() == want })
}

// kill closes the listener and every connection, as a crashed sink would.
func (k *sink) kill() {
	k.ln.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

// closedPort is an address on 127.0.0.1 where nothing listens.
var closedPort = testutil.ClosedAddr
