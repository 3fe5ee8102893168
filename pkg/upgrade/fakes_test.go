package upgrade

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// fakeProc is an Envoy that runs until stopped or told to exit.
type fakeProc struct {
	pid     int
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	stopped bool
	// ignoresTERM: Stop reports a kill.
	ignoresTERM bool
}

func newFakeProc(pid int) *fakeProc { return &fakeProc{pid: pid, done: make(chan struct{})} }

func (p *fakeProc) PID() int              { return p.pid }
func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) exit()                 { p.once.Do(func() { close(p.done) }) }
func (p *fakeProc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
func (p *fakeProc) ExitDescription() string { return "exit status 0" }
func (p *fakeProc) Stop(time.Duration) bool {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.exit()
	return p.ignoresTERM
}
func (p *fakeProc) wasStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

var errAdminDown = errors.New("connect: connection refused")

// fakeAdmin is an admin API that says LIVE once live, with listeners.
type fakeAdmin struct {
	mu          sync.Mutex
	live        bool
	unreachable bool
	listeners   []string
	closed      bool
	drained     bool
	stopped     bool
	drainErr    error
}

func (a *fakeAdmin) Ready(context.Context) (string, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.unreachable:
		return "", false, errAdminDown
	case a.live:
		return "LIVE", true, nil
	}
	return "PRE_INITIALIZING", false, nil
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
