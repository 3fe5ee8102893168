package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

const wait = 5 * time.Second // upper bound for anything that should happen

type socket struct {
	t    *testing.T
	conn *net.UnixConn
	path string
}

// listen binds a notify socket and points NOTIFY_SOCKET at it. The path is
// kept short because sun_path holds at most 108 bytes.
func listen(t *testing.T) *socket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	// The test may itself run under systemd.
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	return &socket{t: t, conn: conn, path: path}
}

// read returns the next datagram, or ok=false if none came within d.
func (s *socket) read(d time.Duration) (msg string, ok bool) {
	s.t.Helper()
	buf := make([]byte, 4096)
	if err := s.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		s.t.Fatal(err)
	}
	n, err := s.conn.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "", false
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return string(buf[:n]), true
}

func (s *socket) next() string {
	s.t.Helper()
	msg, ok := s.read(wait)
	if !ok {
		s.t.Fatal("no notification within", wait)
	}
	return msg
}

// until reads datagrams until one satisfies match and returns it with the
// ones skipped before it.
func (s *socket) until(match func(string) bool) (string, []string) {
	s.t.Helper()
	var skipped []string
	for {
		msg := s.next()
		if match(msg) {
			return msg, skipped
		}
		skipped = append(skipped, msg)
	}
}

// mark puts a marker datagram into the stream, to split it in time.
func (s *socket) mark(m string) {
	s.t.Helper()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(m)); err != nil {
		s.t.Fatal(err)
	}
}

func fields(msg string) map[string]string {
	f := map[string]string{}
	for _, l := range strings.Split(msg, "\n") {
		k, v, _ := strings.Cut(l, "=")
		f[k] = v
	}
	return f
}

// start runs Run in the background. done yields Run's result once; cleanup
// cancels and waits for it.
func start(t *testing.T, tr *state.Tracker, opts Options) (cancel func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		errc <- Run(ctx, tr, opts)
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(wait):
			t.Error("Run did not return after cancel")
		}
	})
	return cancel, errc
}

func TestLifecycle(t *testing.T) {
	old := drainRefresh
	drainRefresh = 20 * time.Millisecond
	t.Cleanup(func() { drainRefresh = old })

	s := listen(t)
	tr := state.NewTracker()
	_, done := start(t, tr, Options{StopGrace: 5 * time.Second})

	if got := s.next(); got != "STATUS=starting" {
		t.Fatalf("first message %q", got)
	}
	steps := []struct {
		phase  state.Phase
		detail string
		want   string
	}{
		{state.WaitingForMesh, `waiting for mesh "payments" (attempt 1, next in 1s)`,
			"READY=1\nSTATUS=waiting for mesh \"payments\" (attempt 1, next in 1s)"},
		{state.WaitingForMesh, `waiting for mesh "payments" (attempt 4, next in 3.2s)`,
			`STATUS=waiting for mesh "payments" (attempt 4, next in 3.2s)`},
		{state.Bootstrapped, "bootstrapped", "STATUS=bootstrapped"},
		{state.EnvoyStarting, "Envoy starting", "STATUS=Envoy starting"},
		{state.Ready, "Envoy ready", "STATUS=Envoy ready"},
	}
	for _, st := range steps {
		tr.Set(st.phase, st.detail)
		if got := s.next(); got != st.want {
			t.Fatalf("in %s got %q, want %q", st.phase, got, st.want)
		}
	}

	deadline := time.Now().Add(25 * time.Second)
	tr.SetDraining("draining", deadline)
	f := fields(s.next())
	if _, ok := f["STOPPING"]; !ok || f["STOPPING"] != "1" {
		t.Fatalf("no STOPPING=1 in %v", f)
	}
	ext, err := strconv.ParseInt(f["EXTEND_TIMEOUT_USEC"], 10, 64)
	if err != nil {
		t.Fatalf("EXTEND_TIMEOUT_USEC: %v in %v", err, f)
	}
	// 25s drain + 5s grace, minus the time it took to get here: no more
	// than 30s, and no less than what is left now.
	if least := (time.Until(deadline) + 5*time.Second).Microseconds(); ext > 30_000_000 || ext < least-1000 {
		t.Fatalf("EXTEND_TIMEOUT_USEC=%d, want between %d and 30s", ext, least)
	}
	if f["STATUS"] != "draining (25s left)" {
		t.Fatalf("STATUS=%q", f["STATUS"])
	}

	// The extension is refreshed while draining, and never grows.
	for i := 0; i < 3; i++ {
		r := fields(s.next())
		if _, ok := r["STOPPING"]; ok {
			t.Fatalf("STOPPING=1 repeated: %v", r)
		}
		e, err := strconv.ParseInt(r["EXTEND_TIMEOUT_USEC"], 10, 64)
		if err != nil || e > ext {
			t.Fatalf("refresh %v: extension %d after %d (%v)", r, e, ext, err)
		}
		ext = e
		if !strings.HasPrefix(r["STATUS"], "draining (") {
			t.Fatalf("refresh STATUS=%q", r["STATUS"])
		}
	}

	tr.Set(state.Stopped, "stopped")
	if _, skipped := s.until(func(m string) bool { return m == "STATUS=stopped" }); len(skipped) > 0 {
		for _, m := range skipped {
			if !strings.HasPrefix(m, "EXTEND_TIMEOUT_USEC=") {
				t.Fatalf("unexpected %q before the final status", m)
			}
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return after STOPPED")
	}
}

// READY=1 goes out once, at the first phase in which the agent is up and
// supervising: Envoy live, or settled into a wait that it retries by itself.
func TestReadyRule(t *testing.T) {
	const never = -1
	cases := []struct {
		name      string
		phases    []state.Phase
		readyAtIx int // index into phases of the message carrying READY=1
	}{
		{"mesh exists, control plane up",
			[]state.Phase{state.Bootstrapped, state.EnvoyStarting, state.Ready}, 2},
		{"mesh missing, then created",
			[]state.Phase{state.WaitingForMesh, state.WaitingForMesh, state.Bootstrapped, state.EnvoyStarting, state.Ready}, 0},
		{"control plane down, then up",
			[]state.Phase{state.WaitingForControlPlane, state.WaitingForMesh, state.Bootstrapped, state.EnvoyStarting, state.Ready}, 0},
		{"first attempt succeeds only after a retry",
			[]state.Phase{state.Starting, state.WaitingForControlPlane, state.Bootstrapped}, 1},
		{"Envoy waits for its first configuration",
			[]state.Phase{state.Bootstrapped, state.EnvoyStarting, state.WaitingForControlPlane, state.Ready}, 2},
		{"Envoy live but no zone listener yet",
			[]state.Phase{state.Bootstrapped, state.EnvoyStarting, state.NoZoneListener, state.Ready}, 2},
		{"stopped while waiting for the mesh",
			[]state.Phase{state.WaitingForMesh, state.Terminating, state.Stopped}, 0},
		{"stopped before Envoy was live",
			[]state.Phase{state.Bootstrapped, state.EnvoyStarting, state.Terminating, state.Stopped}, never},
		{"refused for good",
			[]state.Phase{state.Failed}, never},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := listen(t)
			tr := state.NewTracker()
			start(t, tr, Options{StopGrace: time.Second})
			s.next() // STATUS=starting
			for i, p := range tc.phases {
				detail := fmt.Sprintf("step %d: %s", i, p)
				tr.Set(p, detail)
				f := fields(s.next())
				if f["STATUS"] != detail {
					t.Fatalf("step %d (%s): STATUS=%q, want %q", i, p, f["STATUS"], detail)
				}
				_, ready := f["READY"]
				if want := i == tc.readyAtIx; ready != want {
					t.Fatalf("step %d (%s): READY=1 sent: %v, want %v", i, p, ready, want)
				}
			}
		})
	}
}

func TestReadyOnlyOnce(t *testing.T) {
	s := listen(t)
	tr := state.NewTracker()
	start(t, tr, Options{})
	s.next() // STATUS=starting

	tr.Set(state.Ready, "Envoy ready")
	if got := s.next(); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("got %q", got)
	}
	tr.Set(state.Ready, "Envoy ready (config updated)")
	if got, want := s.next(), "STATUS=Envoy ready (config updated)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestFailedEndsRun(t *testing.T) {
	s := listen(t)
	tr := state.NewTracker()
	_, done := start(t, tr, Options{})
	s.next()

	tr.Set(state.Failed, "bootstrap rejected: mesh \"payments\" is invalid\nsecond line")
	if got, want := s.next(), `STATUS=bootstrap rejected: mesh "payments" is invalid second line`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return after FAILED")
	}
}

func TestDrainRefreshStopsAfterPromisedEnd(t *testing.T) {
	old := drainRefresh
	drainRefresh = 10 * time.Millisecond
	t.Cleanup(func() { drainRefresh = old })

	s := listen(t)
	tr := state.NewTracker()
	start(t, tr, Options{StopGrace: 50 * time.Millisecond})
	s.next()

	// A second signal: drain over at once, only Envoy's stop remains.
	tr.SetDraining("stopping Envoy", time.Now())
	f := fields(s.next())
	if f["STOPPING"] != "1" || f["STATUS"] != "stopping Envoy" {
		t.Fatalf("got %v", f)
	}
	if e, _ := strconv.ParseInt(f["EXTEND_TIMEOUT_USEC"], 10, 64); e > 50_000 {
		t.Fatalf("EXTEND_TIMEOUT_USEC=%d beyond the grace", e)
	}
	// Past deadline+grace nothing more is promised, so a wedged agent is
	// still killed by TimeoutStopSec.
	time.Sleep(60 * time.Millisecond) // let the promised end pass
	s.mark("MARK")
	s.until(func(m string) bool { return m == "MARK" })
	if m, ok := s.read(100 * time.Millisecond); ok {
		t.Fatalf("still extending after the promised end: %q", m)
	}
}

func TestTerminatingWithoutDrain(t *testing.T) {
	s := listen(t)
	tr := state.NewTracker()
	start(t, tr, Options{StopGrace: 5 * time.Second})
	s.next()
	tr.Set(state.WaitingForMesh, "waiting for mesh")
	s.next()

	tr.Set(state.Terminating, "stopping while waiting for mesh")
	want := "STOPPING=1\nEXTEND_TIMEOUT_USEC=5000000\nSTATUS=stopping while waiting for mesh"
	if got := s.next(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestNoSocketIsNoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	errc := make(chan error, 1)
	go func() { errc <- Run(context.Background(), state.NewTracker(), Options{}) }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return without NOTIFY_SOCKET")
	}
}

func TestCancelEndsRun(t *testing.T) {
	s := listen(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	cancel, done := start(t, state.NewTracker(), Options{})
	s.next()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return after cancel")
	}
}

func TestCancelStillReportsPendingChange(t *testing.T) {
	s := listen(t)
	tr := state.NewTracker()
	cancel, done := start(t, tr, Options{})
	s.next()

	// Whichever Run sees first, the stop or the change, the change is sent.
	tr.Set(state.Stopped, "stopped")
	cancel()
	if got := s.next(); got != "STATUS=stopped" {
		t.Fatalf("got %q", got)
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Run did not return")
	}
}

func TestWatchdog(t *testing.T) {
	s := listen(t)
	const interval = 200 * time.Millisecond
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int(interval.Microseconds())))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	var healthy atomic.Bool
	calls := make(chan bool, 1000)
	var badDeadline atomic.Bool
	tr := state.NewTracker()
	start(t, tr, Options{Healthy: func(ctx context.Context) bool {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) >= interval/2 {
			badDeadline.Store(true)
		}
		h := healthy.Load()
		calls <- h
		return h
	}})
	s.next() // STATUS=starting

	// Waiting for the mesh (already READY=1) there is no Envoy: the agent
	// alone keeps the watchdog fed, whatever Envoy's health says.
	tr.Set(state.WaitingForMesh, "waiting for mesh")
	s.until(func(m string) bool { return strings.HasPrefix(m, "READY=1") })
	for i := 0; i < 2; i++ {
		s.until(func(m string) bool { return m == "WATCHDOG=1" })
	}
	if len(calls) != 0 {
		t.Fatal("Healthy consulted before Envoy runs")
	}

	tr.Set(state.EnvoyStarting, "Envoy starting")
	healthy.Store(true)
	awaitCall(t, calls, true)
	s.until(func(m string) bool { return m == "WATCHDOG=1" })

	// Envoy waiting for its first configuration puts the agent back into
	// WAITING_FOR_CONTROL_PLANE, but Envoy runs: its health still counts.
	// Once a check has returned false, every earlier ping is already queued;
	// between the markers there must be none.
	tr.Set(state.WaitingForControlPlane, "Envoy waits for its first configuration")
	healthy.Store(false)
	awaitCall(t, calls, false)
	s.mark("MARK1")
	for i := 0; i < 3; i++ {
		awaitCall(t, calls, false)
	}
	s.mark("MARK2")
	s.until(func(m string) bool { return m == "MARK1" })
	_, between := s.until(func(m string) bool { return m == "MARK2" })
	for _, m := range between {
		if m == "WATCHDOG=1" {
			t.Fatalf("watchdog pinged while Envoy was unhealthy: %q", between)
		}
	}

	// Healthy again: the pings resume.
	tr.Set(state.Ready, "Envoy ready")
	healthy.Store(true)
	awaitCall(t, calls, true)
	s.until(func(m string) bool { return m == "WATCHDOG=1" })

	if badDeadline.Load() {
		t.Fatal("Healthy ran without a deadline inside the ping period")
	}
}

// One failed health check, or one ping lost, never lets the watchdog fire.
func TestOneMissedPingLeavesTimeToSpare(t *testing.T) {
	for _, interval := range []time.Duration{time.Second, 30 * time.Second, 3 * time.Minute} {
		if p := pingPeriod(interval); p <= 0 || 2*p >= interval {
			t.Errorf("WatchdogSec=%s: a ping every %s; after one missed the next comes %s after the last, not before the watchdog", interval, p, 2*p)
		}
	}
}

func TestWatchdogForeignPID(t *testing.T) {
	s := listen(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	called := make(chan struct{}, 1)
	tr := state.NewTracker()
	start(t, tr, Options{Healthy: func(context.Context) bool {
		select {
		case called <- struct{}{}:
		default:
		}
		return true
	}})
	s.next()
	tr.Set(state.Ready, "Envoy ready")
	s.until(func(m string) bool { return strings.HasPrefix(m, "READY=1") })
	// Several ping periods (50ms) with nothing: the watchdog belongs to
	// another process.
	if m, ok := s.read(300 * time.Millisecond); ok {
		t.Fatalf("got %q for a foreign WATCHDOG_PID", m)
	}
	if len(called) != 0 {
		t.Fatal("Healthy consulted for a foreign WATCHDOG_PID")
	}
}

func TestScrubEnv(t *testing.T) {
	in := []string{
		"PATH=/usr/bin", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=30000000",
		"WATCHDOG_PID=1", "LISTEN_FDS=1", "LISTEN_PID=1", "LISTEN_FDNAMES=x",
		"RUNTIME_DIRECTORY=/run/zoneproxy/a", "NOTIFY_SOCKETX=keep", "JOURNAL_STREAM=8:1",
	}
	got := ScrubEnv(in)
	want := []string{"PATH=/usr/bin", "RUNTIME_DIRECTORY=/run/zoneproxy/a", "NOTIFY_SOCKETX=keep", "JOURNAL_STREAM=8:1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if in[1] != "NOTIFY_SOCKET=/run/systemd/notify" {
		t.Fatal("ScrubEnv modified its input")
	}
}

func awaitCall(t *testing.T, calls <-chan bool, want bool) {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case got := <-calls:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("no Healthy call returning %v", want)
		}
	}
}

// After a reload every STATUS= line names the agent's and Envoy's
// generations; before any, nothing is added.
func TestStatusNamesTheGenerations(t *testing.T) {
	s := listen(t)
	tr := state.NewTracker()
	gen := ""
	var mu sync.Mutex
	start(t, tr, Options{Generations: func() string { mu.Lock(); defer mu.Unlock(); return gen }})
	if got := s.next(); strings.Contains(got, "[") {
		t.Fatalf("before a reload: %q", got)
	}
	mu.Lock()
	gen = "agent generation 2, Envoy generation 1"
	mu.Unlock()
	tr.Set(state.Ready, "Envoy ready")
	if got := s.next(); !strings.HasPrefix(got, "READY=1\n") || !strings.HasSuffix(got, " [agent generation 2, Envoy generation 1]") {
		t.Fatalf("after a reload: %q", got)
	}
}
