package dynconf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const (
	testInterval = 20 * time.Millisecond
	awaitCeiling = 10 * time.Second
)

// listener stands in for Envoy's system_dynamicconfig listener.
type listener struct {
	t      *testing.T
	socket string

	mu     sync.Mutex
	bodies map[string]string // path → body; absent means 404
	srv    *http.Server
	reqs   chan request
}

type request struct{ path, ifNoneMatch string }

func etagOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

func shortSocket(t *testing.T) string {
	dir, err := os.MkdirTemp("", "zp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "kuma-mesh-metric-config.sock")
}

func newListener(t *testing.T, bodies map[string]string) *listener {
	l := &listener{t: t, socket: shortSocket(t), bodies: bodies, reqs: make(chan request, 1000)}
	l.start()
	t.Cleanup(func() { l.stop(true) })
	return l
}

func (l *listener) start() {
	ln, err := net.Listen("unix", l.socket)
	if err != nil {
		l.t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // stop decides
	srv := &http.Server{Handler: http.HandlerFunc(l.serve)}
	l.mu.Lock()
	l.srv = srv
	l.mu.Unlock()
	go srv.Serve(ln)
}

// stop closes the listener; unlink=false leaves a stale socket file behind.
func (l *listener) stop(unlink bool) {
	l.mu.Lock()
	srv := l.srv
	l.srv = nil
	l.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Close()
	if unlink {
		os.Remove(l.socket)
	}
}

func (l *listener) set(path string, body *string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if body == nil {
		delete(l.bodies, path)
	} else {
		l.bodies[path] = *body
	}
}

func (l *listener) serve(w http.ResponseWriter, r *http.Request) {
	l.reqs <- request{r.URL.Path, r.Header.Get("If-None-Match")}
	l.mu.Lock()
	body, ok := l.bodies[r.URL.Path]
	l.mu.Unlock()
	switch {
	case !ok:
		w.WriteHeader(http.StatusNotFound)
	case r.Header.Get("If-None-Match") == etagOf(body):
		w.WriteHeader(http.StatusNotModified)
	default:
		w.Header().Set("Etag", etagOf(body))
		w.Write([]byte(body))
	}
}

// breakAndAwaitPolls replaces the listener with one that accepts and
// closes, like an Envoy stand-in's broken pipe, and returns after n polls
// reached it. Swapped in with a rename so that no poll finds the socket
// missing.
func (l *listener) breakAndAwaitPolls(n int) {
	l.t.Helper()
	ln, err := net.Listen("unix", l.socket+".new")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { ln.Close() })
	if err := os.Rename(l.socket+".new", l.socket); err != nil {
		l.t.Fatal(err)
	}
	l.stop(false)
	for range n {
		c, err := ln.Accept()
		if err != nil {
			l.t.Fatal(err)
		}
		c.Close()
	}
}

// drain forgets the requests seen so far.
func (l *listener) drain() {
	for {
		select {
		case <-l.reqs:
		default:
			return
		}
	}
}

// awaitRequest returns the next request for path, skipping others.
func (l *listener) awaitRequest(path string) request {
	l.t.Helper()
	deadline := time.After(awaitCeiling)
	for {
		select {
		case r := <-l.reqs:
			if r.path == path {
				return r
			}
		case <-deadline:
			l.t.Fatalf("no request for %s within %s", path, awaitCeiling)
		}
	}
}

// recorder is a handler that records what it was given.
type recorder struct {
	calls  chan *string
	mu     sync.Mutex
	reject func(body string) error
}

func newRecorder() *recorder { return &recorder{calls: make(chan *string, 1000)} }

func (r *recorder) handle(body []byte) error {
	var got *string
	if body != nil {
		s := string(body)
		got = &s
	}
	r.calls <- got
	r.mu.Lock()
	reject := r.reject
	r.mu.Unlock()
	if reject != nil && got != nil {
		return reject(*got)
	}
	return nil
}

func (r *recorder) await(t *testing.T) *string {
	t.Helper()
	select {
	case b := <-r.calls:
		return b
	case <-time.After(awaitCeiling):
		t.Fatalf("handler not called within %s", awaitCeiling)
		return nil
	}
}

func (r *recorder) expectNone(t *testing.T) {
	t.Helper()
	select {
	case b := <-r.calls:
		t.Fatalf("unexpected handler call with %s", describe(b))
	default:
	}
}

func describe(b *string) string {
	if b == nil {
		return "no config (nil)"
	}
	return "body " + *b
}

func ptr(s string) *string { return &s }

func startPoller(t *testing.T, socket string, handlers map[string]Handler, log *zap.Logger) *Poller {
	t.Helper()
	p, err := New(Options{Socket: socket, Interval: testInterval, Handlers: handlers, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

func TestPollsEveryIntervalAndSendsTheAcceptedETag(t *testing.T) {
	const body = `{"observability":{}}`
	l := newListener(t, map[string]string{"/meshmetric": body})
	mm, otel := newRecorder(), newRecorder()
	startPoller(t, l.socket, map[string]Handler{"/meshmetric": mm.handle, "/otel": otel.handle}, nil)

	if r := l.awaitRequest("/meshmetric"); r.ifNoneMatch != "" {
		t.Fatalf("first request sent If-None-Match %q; want none", r.ifNoneMatch)
	}
	if got := mm.await(t); got == nil || *got != body {
		t.Fatalf("handler got %s; want body %s", describe(got), body)
	}
	l.drain()
	for range 3 {
		if r := l.awaitRequest("/meshmetric"); r.ifNoneMatch != etagOf(body) {
			t.Fatalf("later request sent If-None-Match %q; want %q", r.ifNoneMatch, etagOf(body))
		}
		l.awaitRequest("/otel")
	}
	mm.expectNone(t)   // 304s are not handed on
	otel.expectNone(t) // a 404 for a path that never had config is not news
}

// One poll at start, then one per tick of a ticker set to the interval
// (kuma-dp's refresh: 1 s by default).
func TestPollsOncePerTickOfTheInterval(t *testing.T) {
	ticks := make(chan time.Time)
	var asked time.Duration
	original := newTicker
	newTicker = func(d time.Duration) (<-chan time.Time, func()) { asked = d; return ticks, func() {} }
	t.Cleanup(func() { newTicker = original })
	l := newListener(t, map[string]string{"/meshmetric": "v1"})
	startPoller(t, l.socket, map[string]Handler{"/meshmetric": newRecorder().handle}, nil)
	l.awaitRequest("/meshmetric")
	for range 2 {
		ticks <- time.Now() // taken only by a poller waiting for its next tick
		l.awaitRequest("/meshmetric")
	}
	if asked != testInterval {
		t.Errorf("ticker every %v, want the interval %v", asked, testInterval)
	}
}

func TestReappliesAChangedBody(t *testing.T) {
	l := newListener(t, map[string]string{"/meshmetric": "v1"})
	mm := newRecorder()
	startPoller(t, l.socket, map[string]Handler{"/meshmetric": mm.handle}, nil)
	if got := mm.await(t); got == nil || *got != "v1" {
		t.Fatalf("handler got %s; want v1", describe(got))
	}
	l.set("/meshmetric", ptr("v2"))
	if got := mm.await(t); got == nil || *got != "v2" {
		t.Fatalf("handler got %s; want v2", describe(got))
	}
	l.drain()
	if r := l.awaitRequest("/meshmetric"); r.ifNoneMatch != etagOf("v2") {
		t.Fatalf("If-None-Match %q after v2; want %q", r.ifNoneMatch, etagOf("v2"))
	}
	mm.expectNone(t)
}

func TestConfigGoneIsToldOnceAndTheETagForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(l *listener)
	}{
		{"404", func(l *listener) { l.set("/meshmetric", nil) }},
		{"socket removed", func(l *listener) { l.stop(true) }},
		{"nobody listening on the socket", func(l *listener) { l.stop(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newListener(t, map[string]string{"/meshmetric": "v1"})
			mm := newRecorder()
			startPoller(t, l.socket, map[string]Handler{"/meshmetric": mm.handle}, nil)
			if got := mm.await(t); got == nil {
				t.Fatal("handler got nil; want v1")
			}

			tc.remove(l)
			if got := mm.await(t); got != nil {
				t.Fatalf("handler got %s; want no config (nil)", describe(got))
			}

			// Serve 404s for a few polls: no second nil.
			l.drain()
			l.set("/meshmetric", nil)
			if l.srv == nil {
				os.Remove(l.socket)
				l.start()
			}
			l.awaitRequest("/meshmetric")
			l.awaitRequest("/meshmetric")
			mm.expectNone(t)

			// The same policy back: applied again, as the ETag was forgotten.
			l.set("/meshmetric", ptr("v1"))
			if got := mm.await(t); got == nil || *got != "v1" {
				t.Fatalf("handler got %s after the policy came back; want v1", describe(got))
			}
		})
	}
}

func TestRejectedBodyKeepsTheLastAcceptedETag(t *testing.T) {
	l := newListener(t, map[string]string{"/meshmetric": "good"})
	mm := newRecorder()
	mm.reject = func(body string) error {
		if body == "bad" {
			return errors.New("bad config")
		}
		return nil
	}
	p := startPoller(t, l.socket, map[string]Handler{"/meshmetric": mm.handle}, nil)
	if got := mm.await(t); got == nil || *got != "good" {
		t.Fatalf("handler got %s; want good", describe(got))
	}

	l.set("/meshmetric", ptr("bad"))
	for range 2 { // offered again on every poll
		if got := mm.await(t); got == nil || *got != "bad" {
			t.Fatalf("handler got %s; want bad", describe(got))
		}
	}
	l.drain()
	if r := l.awaitRequest("/meshmetric"); r.ifNoneMatch != etagOf("good") {
		t.Fatalf("If-None-Match %q after a rejected body; want the accepted one %q", r.ifNoneMatch, etagOf("good"))
	}
	out := metricsPage(t, p)
	if !strings.Contains(out.String(), `zoneproxy_dynconf_handler_errors_total{path="/meshmetric"} `) ||
		strings.Contains(out.String(), `zoneproxy_dynconf_handler_errors_total{path="/meshmetric"} 0`) {
		t.Fatalf("handler errors not counted:\n%s", out.String())
	}
}

func TestBrokenListenerKeepsTheConfigAndWarnsRateLimited(t *testing.T) {
	l := newListener(t, map[string]string{"/meshmetric": "v1"})
	mm := newRecorder()
	core, logs := observer.New(zapcore.WarnLevel)
	p := startPoller(t, l.socket, map[string]Handler{"/meshmetric": mm.handle}, zap.New(core))
	if got := mm.await(t); got == nil {
		t.Fatal("handler got nil; want v1")
	}

	l.breakAndAwaitPolls(4)
	mm.expectNone(t)
	if n := logs.FilterMessageSnippet("cannot fetch").Len(); n != 1 {
		t.Fatalf("%d fetch warnings for 4 failed polls; want 1 (rate-limited)", n)
	}
	// Polls run one after another: the fourth connection means the first
	// three failures are counted.
	out := metricsPage(t, p)
	const sample = `zoneproxy_dynconf_fetch_errors_total{path="/meshmetric"} `
	i := strings.Index(out.String(), sample)
	if i < 0 {
		t.Fatalf("no %s sample:\n%s", sample, out.String())
	}
	value, _, _ := strings.Cut(out.String()[i+len(sample):], "\n")
	if n, err := strconv.Atoi(value); err != nil || n < 3 {
		t.Fatalf("fetch errors counted: %q, want at least 3:\n%s", value, out.String())
	}
}

// A rejected config is warned about even right after a fetch warning, and
// the other way round: each has its own rate limit.
func TestFetchAndConfigWarningsAreLimitedApart(t *testing.T) {
	l := newListener(t, map[string]string{"/meshmetric": "bad"})
	mm := newRecorder()
	mm.reject = func(string) error { return errors.New("bad config") }
	core, logs := observer.New(zapcore.WarnLevel)
	startPoller(t, l.socket, map[string]Handler{"/meshmetric": mm.handle}, zap.New(core))
	mm.await(t)
	mm.await(t) // the second rejection's warning is held back

	l.breakAndAwaitPolls(3) // the third connection means the first two polls failed and warned
	for snippet, want := range map[string]int{"dynamic config rejected": 1, "cannot fetch": 1} {
		if n := logs.FilterMessageSnippet(snippet).Len(); n != want {
			t.Errorf("%d %q warnings; want %d", n, snippet, want)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	h := func([]byte) error { return nil }
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no socket", Options{Handlers: map[string]Handler{"/meshmetric": h}}, "Socket"},
		{"no handlers", Options{Socket: "s"}, "Handlers"},
		{"relative path", Options{Socket: "s", Handlers: map[string]Handler{"meshmetric": h}}, `"meshmetric"`},
		{"nil handler", Options{Socket: "s", Handlers: map[string]Handler{"/otel": nil}}, `"/otel"`},
		{"negative interval", Options{Socket: "s", Interval: -time.Second, Handlers: map[string]Handler{"/otel": h}}, "Interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New() error %v; want one naming %s", err, tc.want)
			}
		})
	}
}

func TestMetricsEscapeLabelValues(t *testing.T) {
	h := func([]byte) error { return nil }
	p, err := New(Options{Socket: "s", Handlers: map[string]Handler{"/a\"b\\c\nd": h}})
	if err != nil {
		t.Fatal(err)
	}
	out := metricsPage(t, p)
	want := `zoneproxy_dynconf_handler_calls_total{path="/a\"b\\c\nd"} 0`
	if !strings.Contains(out.String(), want+"\n") {
		t.Fatalf("metrics lack %s:\n%s", want, out.String())
	}
}
