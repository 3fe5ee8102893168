// Package supervisetest has the fake Envoy process and admin API that
// the supervisor's tests and the agent's drive.
package supervisetest

import (
	"context"
	"sync"
	"time"
)

// Admin answers the drain's questions from a script of counts.
type Admin struct {
	mu sync.Mutex
	// Counts is the connection count at the call-th reading, from 1.
	Counts func(call int) (int, error)
	Calls  int
	// FailErr is FailHealthChecks's answer.
	FailErr error
	failed  time.Time
	// Live is /ready's call-th answer, from 1; nil is LIVE.
	Live       func(call int) (word string, live bool, err error)
	readyCalls int
}

func (f *Admin) Ready(context.Context) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Live == nil {
		return "LIVE", true, nil
	}
	f.readyCalls++
	return f.Live(f.readyCalls)
}

func (f *Admin) FailHealthChecks(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = time.Now()
	return f.FailErr
}

// FailedAt is when FailHealthChecks was asked last; zero: never.
func (f *Admin) FailedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *Admin) DrainListeners(context.Context) error { return nil }
func (f *Admin) StopListeners(context.Context) error  { return nil }

func (f *Admin) DownstreamConnections(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	return f.Counts(f.Calls)
}

// Proc is an Envoy that exits when told to.
type Proc struct {
	done     chan struct{}
	once     sync.Once
	BySignal bool // it ended as if told to stop
	Ignores  bool // SIGTERM: Stop reports a kill
	Stops    int
	OnAsked  func() // called when the supervisor asks how Envoy ended
}

func NewProc() *Proc { return &Proc{done: make(chan struct{})} }

func (p *Proc) PID() int                { return 4242 }
func (p *Proc) Done() <-chan struct{}   { return p.done }
func (p *Proc) ExitDescription() string { return "exit status 0" }
func (p *Proc) StoppedBySignal() bool {
	if p.OnAsked != nil {
		go p.OnAsked()
	}
	return p.BySignal
}

// Exit ends it.
func (p *Proc) Exit() { p.once.Do(func() { close(p.done) }) }

func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *Proc) Stop(time.Duration) bool { p.Stops++; p.Exit(); return p.Ignores }
