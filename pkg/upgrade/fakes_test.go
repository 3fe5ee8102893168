package upgrade

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// fakeProc is an Envoy that runs until stopped or told to exit.
type fakeProc struct {
	pid    int
	done   chan struct{}
	once   sync.Once
	exited atomic.Bool
	// stopped: Stop was called; ignoresTERM: Stop reports a kill.
	stopped     atomic.Bool
	ignoresTERM bool
}

func newFakeProc(pid int) *fakeProc { return &fakeProc{pid: pid, done: make(chan struct{})} }

func (p *fakeProc) PID() int                { return p.pid }
func (p *fakeProc) Done() <-chan struct{}   { return p.done }
func (p *fakeProc) Exited() bool            { return p.exited.Load() }
func (p *fakeProc) exit()                   { p.once.Do(func() { p.exited.Store(true); close(p.done) }) }
func (p *fakeProc) ExitDescription() string { return "exit status 0" }
func (p *fakeProc) Stop(time.Duration) bool {
	p.stopped.Store(true)
	p.exit()
	return p.ignoresTERM
}

var errAdminDown = errors.New("connect: connection refused")

// fakeAdmin is an admin API that answers /ready with word (or err), and
// has listeners.
type fakeAdmin struct {
	mu        sync.Mutex
	word      string
	err       error
	listeners []string
	closed    bool
	drained   bool
	stopped   bool
	drainErr  error
}

func (a *fakeAdmin) Ready(context.Context) (string, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.word, a.err == nil && a.word == "LIVE", a.err
}

func (a *fakeAdmin) Listeners(context.Context) ([]envoy.Listener, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []envoy.Listener
	for _, n := range a.listeners {
		out = append(out, envoy.Listener{Name: n})
	}
	return out, nil
}

func (a *fakeAdmin) DrainListeners(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drained = true
	return a.drainErr
}

func (a *fakeAdmin) StopListeners(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	return a.drainErr
}

func (a *fakeAdmin) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
}

func (a *fakeAdmin) state() (drained, stopped, closed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drained, a.stopped, a.closed
}

// fakeRelay moves the stream as told.
type fakeRelay struct {
	state       string // "" is connected
	completeErr error
	mu          sync.Mutex
	began       int // the serving pid BeginHandover was given
	ended       bool
}

func (r *fakeRelay) Takeable() (string, bool) {
	if r.state == "" {
		return "connected", true
	}
	return r.state, false
}
func (r *fakeRelay) BeginHandover(serving int) { r.mu.Lock(); r.began = serving; r.mu.Unlock() }
func (r *fakeRelay) CompleteHandover(context.Context) error {
	return r.completeErr
}
func (r *fakeRelay) EndHandover() { r.mu.Lock(); r.ended = true; r.mu.Unlock() }
