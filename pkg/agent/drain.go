package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

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
	drainSkipped     drainEnd = "second signal"
	drainEnvoyExited drainEnd = "envoy exited"
	drainCancelled   drainEnd = "cancelled" // a maintenance drain: stop or undrain
)

// drainWindow is one drain's timing: it may end once earliest has passed
// and the listeners are quiet, and ends at deadline.
type drainWindow struct{ start, earliest, deadline time.Time }

// newDrainWindow starts now. Health checks that have failed since
// failingSince (a maintenance drain) count toward --drain-min.
func (a *Agent) newDrainWindow(failingSince time.Time) drainWindow {
	start := time.Now()
	if failingSince.IsZero() {
		failingSince = start
	}
	return drainWindow{
		start:    start,
		earliest: failingSince.Add(min(a.cfg.DrainMin, a.cfg.DrainTime)),
		deadline: start.Add(a.cfg.DrainTime),
	}
}

// drain fails Envoy's health checks, drains its listeners and waits for
// --drain-time. It may end early once --drain-min has passed (so a load
// balancer has seen the failing health check) and the listeners have had no
// connection for drainQuiet; a second stop signal or Envoy's exit ends it.
func (a *Agent) drain(admin drainAdmin, proc EnvoyProcess) drainEnd {
	w := a.newDrainWindow(a.failingSince)
	a.tracker.SetDraining(drainDetail(w.deadline), w.deadline)
	a.log.Info("draining Envoy", zap.Duration("drain-time", a.cfg.DrainTime), zap.Duration("drain-min", min(a.cfg.DrainMin, a.cfg.DrainTime)))
	ctx, cancel := context.WithDeadline(context.Background(), w.deadline.Add(time.Second))
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
	end := a.awaitDrain(ctx, admin, proc, w, a.skipDrain, func() { a.tracker.SetDraining(drainDetail(w.deadline), w.deadline) })
	if end == drainCancelled {
		a.log.Info("second stop signal: skipping the rest of the drain")
		return drainSkipped
	}
	return end
}

// awaitDrain waits out w: until the listeners have been quiet for
// drainQuiet after w.earliest, w.deadline, Envoy's exit, or cancel
// (drainCancelled). tick runs every drainTick.
func (a *Agent) awaitDrain(ctx context.Context, admin drainAdmin, proc EnvoyProcess, w drainWindow, cancel <-chan struct{}, tick func()) drainEnd {
	ticker := time.NewTicker(drainTick)
	defer ticker.Stop()
	end := time.NewTimer(time.Until(w.deadline))
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
		if !idleSince.IsZero() && now.Sub(idleSince) >= drainQuiet && !now.Before(w.earliest) {
			a.log.Info("no downstream connections left; ending the drain early", zap.Duration("after", now.Sub(w.start).Round(time.Millisecond)))
			return drainIdle
		}
		select {
		case <-end.C:
			a.log.Info("drain time is over")
			return drainTimeUp
		case <-cancel:
			return drainCancelled
		case <-proc.Done():
			a.log.Info("Envoy stopped before the drain finished", zap.String("status", proc.ExitDescription()))
			return drainEnvoyExited
		case <-ticker.C:
			tick()
		}
	}
}

// connections reads Envoy's count, logging it at debug and a failure to
// read it at warn (once per distinct error).
func (a *Agent) connections(ctx context.Context, admin drainAdmin, lastErr *string) (int, error) {
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
func (a *Agent) stop(proc EnvoyProcess, why string) {
	a.tracker.Set(state.Terminating, "stopping Envoy")
	if proc.Exited() {
		return
	}
	if proc.Stop(StopGrace) {
		a.log.Warn("Envoy ignored SIGTERM; killed it", zap.Duration("after", StopGrace))
	}
	a.log.Info("Envoy "+why, zap.String("status", proc.ExitDescription()))
}
