package supervise

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fakeAdmin answers from a script of connection counts and readiness.
type fakeAdmin struct {
	mu      sync.Mutex
	counts  func(call int) (int, error)
	calls   int
	failErr error
	live    func(call int) (string, bool, error) // nil: LIVE
}

func (f *fakeAdmin) Ready(context.Context) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.live == nil {
		return "LIVE", true, nil
	}
	return f.live(f.calls)
}
func (f *fakeAdmin) FailHealthChecks(context.Context) error { return f.failErr }
func (f *fakeAdmin) DrainListeners(context.Context) error   { return nil }
func (f *fakeAdmin) StopListeners(context.Context) error    { return nil }
func (f *fakeAdmin) DownstreamConnections(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.counts(f.calls)
}

// fakeProc is an Envoy that exits when told to.
type fakeProc struct {
	done     chan struct{}
	once     sync.Once
	bySignal bool
	ignores  bool // SIGTERM: Stop reports a kill
	stops    int
}

func newFakeProc() *fakeProc { return &fakeProc{done: make(chan struct{})} }

func (p *fakeProc) PID() int                { return 4242 }
func (p *fakeProc) Done() <-chan struct{}   { return p.done }
func (p *fakeProc) ExitDescription() string { return "exit status 0" }
func (p *fakeProc) StoppedBySignal() bool   { return p.bySignal }
func (p *fakeProc) exit()                   { p.once.Do(func() { close(p.done) }) }
func (p *fakeProc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
func (p *fakeProc) Stop(time.Duration) bool { p.stops++; p.exit(); return p.ignores }

func testSupervisor(t *testing.T) (*Supervisor, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	return &Supervisor{Log: zap.New(core)}, logs
}
