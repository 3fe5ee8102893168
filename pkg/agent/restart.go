package agent

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/host/sdjob"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// A restart is not a stop. A stopping zone egress leaves kuma-cp's egress
// set first (withdraw.go), which is right when it goes away and costs a
// lone egress's sidecars about 15 s when it comes straight back: the
// withdrawal, then kuma-cp's refusal of the next stream. So at the stop
// signal the agent finds out which it is: under systemd from the unit's
// pending job (`systemctl restart` is a job of its own), elsewhere from
// the signal (SIGUSR1 asks for a restart). On a restart the egress stays
// Ready in kuma-cp, the drain lasts only as long as connections in flight
// need, and the next start serves from its cache at once.

// RestartSignal stops the agent as for a restart.
const RestartSignal = syscall.SIGUSR1

// StopJob says whether systemd's pending job for the agent's unit is a
// restart (sdjob.Asker.Restarting).
type StopJob func(ctx context.Context) (bool, error)

// stopKind is what a stop is for, and how the agent knows.
type stopKind struct {
	restart bool
	why     string
}

// Word is /status's "stop": what the stop under way is.
func (k stopKind) Word() string {
	if k.restart {
		return "restart"
	}
	return "stop"
}

// stopIntent is settled once, at the first stop signal; without one (a
// cancelled context) a stop is a stop.
type stopIntent struct {
	once  sync.Once
	done  chan struct{}
	kind  stopKind
	asked atomic.Bool // a stop signal came: its kind is on its way
}

func newStopIntent() *stopIntent { return &stopIntent{done: make(chan struct{})} }

func (s *stopIntent) settle(k stopKind) {
	s.once.Do(func() {
		s.kind = k
		close(s.done)
	})
}

// wait is the stop's kind once known; past sdjob.AskTimeout and a margin
// it is a stop, and without a stop signal at once.
func (s *stopIntent) wait() stopKind {
	if !s.asked.Load() {
		s.settle(stopKind{why: "no stop signal: the agent's context ended"})
	}
	t := time.NewTimer(sdjob.AskTimeout + time.Second)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.settle(stopKind{why: "no answer from systemd in time"})
	}
	return s.kind
}

// settled is the stop's kind if known yet.
func (s *stopIntent) settled() (stopKind, bool) {
	select {
	case <-s.done:
		return s.kind, true
	default:
		return stopKind{}, false
	}
}

// read settles what the stop signal sig is for, off the signal loop:
// systemd (ask) may take up to sdjob.AskTimeout to answer.
func (s *stopIntent) read(sig os.Signal, ask StopJob, log *zap.Logger) {
	s.asked.Store(true)
	if sig == RestartSignal {
		s.settle(stopKind{restart: true, why: "SIGUSR1 asked for a restart"})
		return
	}
	if os.Getenv("INVOCATION_ID") == "" {
		s.settle(stopKind{why: sig.String() + " outside systemd (SIGUSR1 asks for a restart)"})
		return
	}
	go func() {
		restart, err := ask(context.Background())
		switch {
		case err != nil:
			log.Warn("cannot ask systemd whether this stop is a restart; taking it for a stop", zap.Error(err))
			s.settle(stopKind{why: "systemd's job unknown"})
		case restart:
			s.settle(stopKind{restart: true, why: "systemd's job for the unit is a restart"})
		default:
			s.settle(stopKind{why: "systemd's job for the unit is a stop"})
		}
	}()
}

// stopServing ends a serving Envoy on a stop or a restart, then stops it.
func (a *Agent) stopServing(e *supervised) {
	kind := a.stopAs.wait()
	drainMin := a.cfg.DrainMin
	switch {
	case kind.restart:
		a.log.Info(restartWords(a.cfg.Role.HasEgress() && !a.egressWithdrawn, a.cfg.Role.HasIngress()), zap.String("why", kind.why))
	case a.cfg.Role.HasEgress() && !a.egressWithdrawn && a.xds.get() != nil:
		a.log.Info("stop: withdrawing the zone egress from kuma-cp's egress set first", zap.String("why", kind.why))
	}
	if kind.restart && !a.cfg.Role.HasIngress() {
		// No load balancer watches an egress's health: the sidecars go on
		// sending it connections, as kuma-cp still lists it.
		drainMin = 0
	}
	if !kind.restart && !a.egressWithdrawn {
		a.tracker.SetDraining(withdrawingWords("draining"), time.Now().Add(WithdrawTime+a.cfg.DrainTime))
		a.egressWithdrawn = a.xds.withdrawEgress(a.cfg.Role.HasEgress(), a.skipDrain, a.tracker)
	}
	a.drain(e.Admin, e.Proc, drainMin)
	a.stop(e.Proc, "stopped")
}

// restartWords is the journal's line for a restart: what happens to the
// egress, and how long the drain lasts.
func restartWords(egress, loadBalanced bool) string {
	drain := "Envoy drains only the connections in flight, and the next start serves from its cache at once"
	if loadBalanced {
		drain = "Envoy drains as for a stop, so that a load balancer sees the failing health check before the listeners close"
	}
	if egress {
		return "restart: the egress stays in kuma-cp's egress set; " + drain
	}
	return "restart: " + drain
}

// status is /status's stop word while one is under way (phase).
func (s *stopIntent) status(phase state.Phase) string {
	if k, ok := s.settled(); ok && phase == state.Terminating {
		return k.Word()
	}
	return ""
}
