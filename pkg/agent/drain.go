package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// envoyAdmin is what the agent asks of Envoy's admin API.
type envoyAdmin interface {
	Ready(ctx context.Context) (word string, live bool, err error)
	FailHealthChecks(ctx context.Context) error
	DrainListeners(ctx context.Context) error
	DownstreamConnections(ctx context.Context) (int, error)
}

// envoyProcess is the running Envoy as the agent supervises it.
type envoyProcess interface {
	PID() int
	Done() <-chan struct{}
	Exited() bool
	ExitDescription() string
	StoppedBySignal() bool
	Stop(grace time.Duration) (killed bool)
}

// Drain pacing. The quiet period keeps a reading of zero between two
// connections (a client reconnecting, a scrape) from ending the drain.
const (
	drainTick   = 250 * time.Millisecond
	drainQuiet  = time.Second
	adminBudget = 2 * time.Second
)

// drainEnd says why a drain ended.
type drainEnd string

const (
	drainNoAdmin     drainEnd = "no admin"
	drainIdle        drainEnd = "idle"
	drainTimeUp      drainEnd = "time up"
	drainHurried     drainEnd = "second signal"
	drainEnvoyExited drainEnd = "envoy exited"
)

// drain fails Envoy's health checks, drains its listeners and waits for
// --drain-time. It may end early once --drain-min has passed (so a load
// balancer has seen the failing health check) and the listeners have had no
// connection for drainQuiet; a second stop signal or Envoy's exit ends it.
func (a *Agent) drain(admin envoyAdmin, proc envoyProcess) drainEnd {
	start := time.Now()
	deadline := start.Add(a.cfg.DrainTime)
	earliest := start.Add(min(a.cfg.DrainMin, a.cfg.DrainTime))
	a.tracker.SetDraining(drainDetail(deadline), deadline)
	a.log.Info("draining Envoy", zap.Duration("drain-time", a.cfg.DrainTime), zap.Duration("drain-min", min(a.cfg.DrainMin, a.cfg.DrainTime)))
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(time.Second))
	defer cancel()
	if err := admin.FailHealthChecks(ctx); err != nil {
		select {
		case <-proc.Done():
			a.log.Info("Envoy stopped before the drain finished", zap.String("status", proc.ExitDescription()))
			return drainEnvoyExited
		default:
		}
		a.log.Warn("cannot start the drain through Envoy's admin API; stopping Envoy now", zap.Error(err))
		return drainNoAdmin
	}
	if err := admin.DrainListeners(ctx); err != nil {
		a.log.Warn("cannot drain Envoy's listeners; waiting the drain time anyway", zap.Error(err))
	}
	tick := time.NewTicker(drainTick)
	defer tick.Stop()
	end := time.NewTimer(time.Until(deadline))
	defer end.Stop()
	var idleSince time.Time // zero while connections remain
	var lastErr string
	for {
		now := time.Now()
		n, err := a.connections(ctx, admin, &lastErr)
		switch {
		case err != nil || n > 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = now
		}
		if !idleSince.IsZero() && now.Sub(idleSince) >= drainQuiet && !now.Before(earliest) {
			a.log.Info("no downstream connections left; ending the drain early", zap.Duration("after", now.Sub(start).Round(time.Millisecond)))
			return drainIdle
		}
		select {
		case <-end.C:
			a.log.Info("drain time is over")
			return drainTimeUp
		case <-a.opts.Hurry:
			a.log.Info("second stop signal: skipping the rest of the drain")
			return drainHurried
		case <-proc.Done():
			a.log.Info("Envoy stopped before the drain finished", zap.String("status", proc.ExitDescription()))
			return drainEnvoyExited
		case <-tick.C:
			a.tracker.SetDraining(drainDetail(deadline), deadline)
		}
	}
}

// connections reads Envoy's count, logging it at debug and a failure to
// read it at warn (once per distinct error).
func (a *Agent) connections(ctx context.Context, admin envoyAdmin, lastErr *string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, adminBudget)
	defer cancel()
	n, err := admin.DownstreamConnections(ctx)
	if err != nil {
		if err.Error() != *lastErr {
			*lastErr = err.Error()
			a.log.Warn("cannot read Envoy's connection count during the drain", zap.Error(err))
		}
		return 0, err
	}
	*lastErr = ""
	a.log.Debug("draining", zap.Int("connections", n))
	return n, nil
}

func drainDetail(deadline time.Time) string {
	return fmt.Sprintf("draining (%s left)", time.Until(deadline).Round(time.Second))
}

// stop ends Envoy: SIGTERM, then SIGKILL after StopGrace.
func (a *Agent) stop(proc envoyProcess, why string) {
	a.tracker.Set(state.Terminating, "stopping Envoy")
	if proc.Exited() {
		return
	}
	if proc.Stop(StopGrace) {
		a.log.Warn("Envoy ignored SIGTERM; killed it", zap.Duration("after", StopGrace))
	}
	a.log.Info("Envoy "+why, zap.String("status", proc.ExitDescription()))
}
