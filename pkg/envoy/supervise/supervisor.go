package supervise

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// Supervisor starts, watches, drains and stops Envoy. Its log lines are
// about Envoy alone; what they mean for the zone proxy is its caller's.
type Supervisor struct {
	Envoy Envoy
	Log   *zap.Logger
	// Grace is the time between SIGTERM and SIGKILL; zero is StopGrace.
	Grace time.Duration
	// Skip is closed on a second stop signal: a stop's drain ends at once.
	Skip <-chan struct{}

	now atomic.Pointer[Current] // nil until an Envoy starts
}

// Current is the Envoy started last, as /status, /logging and the
// watchdog see it from other goroutines than the serve loop's.
type Current struct {
	Admin Admin
	Proc  Process
	// Build is the build it reports (or, until it answers, `envoy
	// --version`'s); Generation counts the Envoys of handovers, from 1.
	Build      string
	Generation int64
}

// Started records c as the Envoy started last.
func (s *Supervisor) Started(c Current) { s.now.Store(&c) }

// Now is the Envoy started last; nil before the first.
func (s *Supervisor) Now() *Current { return s.now.Load() }

// Rebuilt records the build c reports, unless another Envoy started since.
func (s *Supervisor) Rebuilt(c *Current, build string) {
	next := *c
	next.Build = build
	s.now.CompareAndSwap(c, &next)
}

// Serving is the Envoy supervised now, in its slot; a restart in place
// replaces Proc, a handover all three.
type Serving struct {
	Admin ServingAdmin
	Proc  Process
	// Start runs a new Envoy from the same bootstrap, in the same slot.
	Start func() (Process, error)
}

// Adoption is a running Envoy handed over by the previous program.
type Adoption struct {
	PID    int
	Output *os.File // Envoy's output pipe, which it keeps writing
}

// Start launches an Envoy as spec says, or takes over adopt's.
func (s *Supervisor) Start(spec envoy.Spec, adopt *Adoption) (Process, error) {
	if adopt == nil {
		return s.Envoy.Start(spec)
	}
	ad, ok := s.Envoy.(Adopter)
	if !ok {
		return nil, errors.New("this Envoy cannot be taken over")
	}
	p, err := ad.Adopt(adopt.PID, adopt.Output, spec)
	if err != nil {
		return nil, fmt.Errorf("cannot take over the running Envoy: %w", err)
	}
	return p, nil
}

func (s *Supervisor) grace() time.Duration {
	if s.Grace > 0 {
		return s.Grace
	}
	return StopGrace
}

// Stop ends proc (SIGTERM, SIGKILL after the grace) and logs "Envoy "+why
// with how it ended; an Envoy already gone is left as it is.
func (s *Supervisor) Stop(proc Process, why string) {
	if proc.Exited() {
		return
	}
	s.terminate(proc)
	s.Log.Info("Envoy "+why, zap.String("status", proc.ExitDescription()))
}

func (s *Supervisor) terminate(proc Process) {
	if proc.Stop(s.grace()) {
		s.Log.Warn("Envoy ignored SIGTERM; killed it", zap.Duration("after", s.grace()))
	}
}

// Restart stops the serving Envoy and starts the next one in its place
// from e.Start; stopped runs in between. e.Proc is the new one after.
func (s *Supervisor) Restart(e *Serving, stopped func()) error {
	s.terminate(e.Proc)
	stopped()
	proc, err := e.Start()
	if err != nil {
		return err
	}
	e.Proc = proc
	return nil
}

// WaitHint is how long Envoy may stay short of LIVE before AwaitLive says
// so; each later word comes after twice the wait.
const WaitHint = 15 * time.Second

// AwaitLive polls Envoy's /ready until LIVE or ctx ends (false), or until
// Envoy exits (true). waiting hears how long Envoy has not been LIVE,
// from WaitHint on, doubling: the word it reports, or why none.
func (s *Supervisor) AwaitLive(ctx context.Context, admin DrainAdmin, proc Process, waiting func(waited time.Duration, word string, err error)) (exited bool) {
	// Envoy usually turns LIVE within a few hundred milliseconds: ask often
	// at first (READY reaches systemd sooner), then settle to a slower pace.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	settled := time.After(2 * time.Second)
	start := time.Now()
	nextHint := WaitHint
	for {
		select {
		case <-proc.Done():
			return true
		case <-ctx.Done():
			return false
		case <-settled:
			tick.Reset(200 * time.Millisecond)
			continue
		case <-tick.C:
		}
		word, live, err := admin.Ready(ctx)
		if live {
			return false
		}
		if waited := time.Since(start); waited >= nextHint {
			nextHint *= 2
			waiting(waited, word, err)
		}
	}
}

// StopSignalGrace is how long an Envoy that exited cleanly or on SIGTERM
// waits for the agent's own stop signal: `systemctl kill` and a terminal's
// process group signal both processes at once, in no set order.
const StopSignalGrace = time.Second

// Stopping says whether proc's exit belongs to a stop (ctx ends): it did
// already, or Envoy ended as if told to stop and ctx ends within
// StopSignalGrace. Otherwise Envoy exited by itself.
func Stopping(ctx context.Context, proc Process) bool {
	if ctx.Err() != nil {
		return true
	}
	if !proc.StoppedBySignal() {
		return false
	}
	t := time.NewTimer(StopSignalGrace)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}
