package accesslog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestStartReplacesWhatIsAtThePath(t *testing.T) {
	tests := []struct {
		name  string
		umask int
		place func(t *testing.T, path string)
	}{
		{"nothing", 0o022, func(*testing.T, string) {}},
		{"a regular file Envoy created", 0o022, func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("stale\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a stale FIFO", 0o022, func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{"a dangling symlink", 0o022, func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "gone"), path); err != nil {
				t.Fatal(err)
			}
		}},
		{"nothing, under a umask that takes the owner's write bit", 0o277, func(*testing.T, string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(t)
			tt.place(t, opts.Path)
			before, _ := os.Lstat(opts.Path)
			held := before != nil && before.Mode().Type() != fs.ModeSymlink
			if held {
				// Held open, the old inode cannot be reused for the new FIFO.
				old, err := os.OpenFile(opts.Path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer old.Close()
			}
			old := syscall.Umask(tt.umask)
			s, err := Start(opts)
			syscall.Umask(old)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			t.Cleanup(func() { s.Close() })

			fi, err := os.Lstat(opts.Path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Type() != fs.ModeNamedPipe || fi.Mode().Perm() != 0o600 {
				t.Errorf("path is %v, want a FIFO with mode 0600", fi.Mode())
			}
			if held && os.SameFile(before, fi) {
				t.Error("the old file at the path was kept")
			}
			a := startSink(t, "127.0.0.1:0")
			openAsEnvoy(t, opts.Path).write(a.addr + ";through\n")
			a.awaitText("through\n")
		})
	}
}

func TestStartRefusesWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"a directory at the path", Options{Path: dir}, dir + ": a directory is in the way"},
		{"a missing parent directory", Options{Path: filepath.Join(dir, "missing", "al.sock")}, filepath.Join(dir, "missing", "al.sock") + ": cannot create it: no such file or directory"},
		{"no path", Options{}, "Options.Path is empty"},
		{"negative queue", Options{Path: filepath.Join(dir, "q.sock"), QueueLines: -1}, "Options.QueueLines is -1"},
		{"negative byte bound", Options{Path: filepath.Join(dir, "qb.sock"), QueueBytes: -1}, "Options.QueueBytes is -1"},
		{"negative idle timeout", Options{Path: filepath.Join(dir, "i.sock"), IdleTimeout: -time.Second}, "Options.IdleTimeout is -1s"},
		{"negative write timeout", Options{Path: filepath.Join(dir, "w.sock"), WriteTimeout: -time.Second}, "Options.WriteTimeout is -1s"},
		{"backoff bounds inverted", Options{Path: filepath.Join(dir, "b.sock"), BackoffMin: time.Second, BackoffMax: time.Millisecond}, "Options.BackoffMax (1ms) is below BackoffMin (1s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(tt.opts)
			if err == nil {
				s.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("the directory in the way was touched: %v", err)
	}
}

func TestCloseForwardsWhatEnvoyWroteAndRemovesTheFIFO(t *testing.T) {
	a := startSink(t, "127.0.0.1:0")
	// The first warning holds the reader, so lines pile up in the pipe
	// until Close has begun.
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	core, _ := observer.New(zapcore.WarnLevel)
	opts := testOptions(t)
	opts.Log = zap.New(core, zap.Hooks(func(zapcore.Entry) error {
		once.Do(func() { close(blocked); <-release })
		return nil
	}))
	s := startStreamer(t, opts)
	w := openAsEnvoy(t, s.opts.Path)
	w.write("garbage\n")
	<-blocked
	var want strings.Builder
	for i := range 200 {
		line := strings.Repeat("x", i) + "\n"
		w.write(a.addr + ";" + line)
		want.WriteString(line)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	await(t, "Close to begin", s.stopping.Load)
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	a.awaitText(want.String())
	if _, err := os.Lstat(s.opts.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FIFO still there after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStalledBackendNeverBlocksTheFIFO(t *testing.T) {
	stalled := startStalledSink(t)
	healthy := startSink(t, "127.0.0.1:0")
	opts := testOptions(t)
	opts.QueueLines = 100
	opts.WriteTimeout = 100 * time.Millisecond
	opts.Dial = (&net.Dialer{Control: smallBuffer(syscall.SO_SNDBUF)}).DialContext
	s := startStreamer(t, opts)
	w := openAsEnvoy(t, s.opts.Path)

	const lines = 5000
	line := stalled.addr + ";" + strings.Repeat("x", 1000) + "\n"
	var burst bytes.Buffer
	for range 50 {
		burst.WriteString(line)
	}
	for range lines / 50 {
		w.write(burst.String()) // fails the test if the FIFO stops draining
	}
	w.write(healthy.addr + ";not held up\n")
	healthy.awaitText("not held up\n")

	await(t, "every line read", func() bool { return metric(s, "zoneproxy_accesslog_lines_read_total") == "5001" })
	for _, reason := range []string{"queue_full", "write_failed"} {
		sample := `zoneproxy_accesslog_lines_dropped_total{backend="` + stalled.addr + `",reason="` + reason + `"}`
		await(t, reason+" drops counted", func() bool { v := metric(s, sample); return v != "" && v != "0" })
	}
}

func TestMetricsNameEveryBackendOnceUnderOneHeader(t *testing.T) {
	a, b := startSink(t, "127.0.0.1:0"), startSink(t, "127.0.0.1:0")
	s := startStreamer(t, testOptions(t))
	w := openAsEnvoy(t, s.opts.Path)
	w.write(b.addr + ";1\n" + a.addr + ";2\ngarbage\n")
	a.awaitText("2\n")
	b.awaitText("1\n")
	first, second := a.addr, b.addr
	if second < first {
		first, second = second, first
	}
	await(t, "both backends connected", func() bool {
		return metric(s, `zoneproxy_accesslog_backend_connected{backend="`+first+`"}`) == "1" &&
			metric(s, `zoneproxy_accesslog_backend_connected{backend="`+second+`"}`) == "1"
	})
	want := `# HELP zoneproxy_accesslog_backend_connected 1 while a connection to the access-log backend is open.
# TYPE zoneproxy_accesslog_backend_connected gauge
zoneproxy_accesslog_backend_connected{backend="FIRST"} 1
zoneproxy_accesslog_backend_connected{backend="SECOND"} 1
# HELP zoneproxy_accesslog_lines_dropped_total Lines dropped, by backend ("" when the line could not be parsed or its backend was closed as idle) and reason.
# TYPE zoneproxy_accesslog_lines_dropped_total counter
zoneproxy_accesslog_lines_dropped_total{backend="",reason="idle"} 0
zoneproxy_accesslog_lines_dropped_total{backend="",reason="invalid"} 1
zoneproxy_accesslog_lines_dropped_total{backend="",reason="too_long"} 0
zoneproxy_accesslog_lines_dropped_total{backend="FIRST",reason="queue_full"} 0
zoneproxy_accesslog_lines_dropped_total{backend="FIRST",reason="write_failed"} 0
zoneproxy_accesslog_lines_dropped_total{backend="SECOND",reason="queue_full"} 0
zoneproxy_accesslog_lines_dropped_total{backend="SECOND",reason="write_failed"} 0
# HELP zoneproxy_accesslog_lines_forwarded_total Lines written to an access-log backend.
# TYPE zoneproxy_accesslog_lines_forwarded_total counter
zoneproxy_accesslog_lines_forwarded_total{backend="FIRST"} 1
zoneproxy_accesslog_lines_forwarded_total{backend="SECOND"} 1
# HELP zoneproxy_accesslog_lines_read_total Lines read from the access-log FIFO.
# TYPE zoneproxy_accesslog_lines_read_total counter
zoneproxy_accesslog_lines_read_total 3
`
	want = strings.NewReplacer("FIRST", first, "SECOND", second).Replace(want)
	if err := promtest.CollectAndCompare(s.Metrics(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestCloseDoesNotWaitOnAStalledBackend(t *testing.T) {
	stalled := startStalledSink(t)
	opts := testOptions(t)
	opts.QueueLines = 10
	opts.WriteTimeout = time.Hour
	opts.Dial = (&net.Dialer{Control: smallBuffer(syscall.SO_SNDBUF)}).DialContext
	s, err := Start(opts) // no cleanup Close: it would wait on this one
	if err != nil {
		t.Fatal(err)
	}
	w := openAsEnvoy(t, s.opts.Path)
	line := stalled.addr + ";" + strings.Repeat("x", 1000) + "\n"
	queueFull := `zoneproxy_accesslog_lines_dropped_total{backend="` + stalled.addr + `",reason="queue_full"}`
	await(t, "the sender to be stuck in a write", func() bool {
		w.write(line)
		v := metric(s, queueFull)
		return v != "" && v != "0"
	})
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(ceiling):
		t.Fatalf("Close still waiting after %v on a backend that never reads", ceiling)
	}
}

// testIdle leaves a line ample time to reach a sink on 127.0.0.1 first.
const testIdle = 300 * time.Millisecond

func TestIdleBackendIsClosedAndForgotten(t *testing.T) {
	const forgot = "closed and forgot the access-log backend"
	tests := []struct {
		name      string
		listening bool // a sink listens before the backend goes idle
		wantDrops int
	}{
		{"live: its connection is closed", true, 0},
		{"dead: its redials stop and its queued lines never reach a later listener", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			opts := testOptions(t)
			opts.Log = zap.New(core)
			opts.IdleTimeout = testIdle
			var dials atomic.Int32
			opts.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, address)
			}
			s := startStreamer(t, opts)
			w := openAsEnvoy(t, s.opts.Path)
			var k *sink
			addr := closedPort(t)
			if tt.listening {
				k = startSink(t, "127.0.0.1:0")
				addr = k.addr
			}
			w.write(addr + ";L1\n" + addr + ";L2\n")
			if k != nil {
				k.awaitText("L1\nL2\n")
			}

			await(t, "the backend to be forgotten as idle", func() bool { return logs.FilterMessageSnippet(forgot).Len() > 0 })
			dialsThen := dials.Load()
			if k != nil {
				await(t, "the sink to see its connection closed", func() bool { return k.endedConns() == 1 })
			}
			if got := metric(s, `zoneproxy_accesslog_backend_connected{backend="`+addr+`"}`); got != "" {
				t.Errorf("the forgotten backend still has a metric series: connected = %s", got)
			}
			if got := metric(s, `zoneproxy_accesslog_lines_dropped_total{backend="",reason="idle"}`); got != strconv.Itoa(tt.wantDrops) {
				t.Errorf("idle drops = %s, want %d", got, tt.wantDrops)
			}
			entries := logs.FilterMessageSnippet(forgot).All()
			if len(entries) != 1 || entries[0].ContextMap()["dropped_lines"] != int64(tt.wantDrops) {
				t.Errorf("log entries %q = %v, want one with dropped_lines=%d", forgot, entries, tt.wantDrops)
			}

			if k == nil {
				k = startSink(t, addr)
			}
			w.write(addr + ";fresh\n")
			await(t, "the fresh line to arrive", func() bool { return strings.Contains(k.text(), "fresh") })
			want := map[bool]string{true: "L1\nL2\nfresh\n", false: "fresh\n"}[tt.listening]
			if got := k.text(); got != want {
				t.Errorf("sink received %q, want %q", got, want)
			}
			if n := dials.Load() - dialsThen; n != 1 {
				t.Errorf("%d dials after the backend was forgotten, want 1 (the fresh backend's)", n)
			}
		})
	}
}

// A line racing the idle removal is either sent or counted as dropped,
// never lost.
func TestLinesRacingIdleRemovalAreSentOrCounted(t *testing.T) {
	for _, idle := range []time.Duration{time.Nanosecond, time.Millisecond} {
		t.Run(idle.String(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			var mu sync.Mutex
			got := map[string]int{}
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					t.Cleanup(func() { c.Close() })
					go func() { // per connection: two connections' lines may interleave
						sc := bufio.NewScanner(c)
						for sc.Scan() {
							mu.Lock()
							got[sc.Text()]++
							mu.Unlock()
						}
					}()
				}
			}()
			opts := testOptions(t)
			opts.IdleTimeout = idle
			s := startStreamer(t, opts)
			w := openAsEnvoy(t, s.opts.Path)
			const lines = 300
			for i := range lines {
				w.write(fmt.Sprintf("%s;L%d\n", ln.Addr(), i))
				if i%10 == 0 {
					w.awaitRead()
				}
			}
			var received, dropped int
			await(t, "every line received or counted as dropped", func() bool {
				mu.Lock()
				received = len(got)
				mu.Unlock()
				dropped, _ = strconv.Atoi(metric(s, `zoneproxy_accesslog_lines_dropped_total{backend="",reason="idle"}`))
				return received+dropped == lines
			})
			t.Logf("%d lines received, %d dropped as idle", received, dropped)
			mu.Lock()
			defer mu.Unlock()
			for line, n := range got {
				if n != 1 {
					t.Errorf("%s received %d times", line, n)
				}
			}
		})
	}
}
