package supervise

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Drain pacing. The quiet period keeps a reading of zero between two
// connections (a client reconnecting, a scrape) from ending the drain.
const (
	DrainTick   = 250 * time.Millisecond
	DrainQuiet  = time.Second
	adminBudget = 2 * time.Second
)

// DrainEnd says why a drain ended.
type DrainEnd string

const (
	DrainNoAdmin     DrainEnd = "no admin"
	DrainIdle        DrainEnd = "idle"
	DrainTimeUp      DrainEnd = "time up"
	DrainSkipped     DrainEnd = "second signal"
	DrainEnvoyExited DrainEnd = "envoy exited"
	DrainCancelled   DrainEnd = "cancelled" // a maintenance drain: stop or undrain
)

// Window is one drain's timing: it may end once Earliest has passed and
// the listeners are quiet, and ends at Deadline.
type Window struct{ Start, Earliest, Deadline time.Time }

// NewWindow starts now and lasts drainTime. Health checks that have
// failed since failingSince (a maintenance drain; zero: now) count toward
// drainMin, which is capped at drainTime.
func NewWindow(failingSince time.Time, drainMin, drainTime time.Duration) Window {
	start := time.Now()
	if failingSince.IsZero() {
		failingSince = start
	}
	return Window{Start: start, Earliest: failingSince.Add(min(drainMin, drainTime)), Deadline: start.Add(drainTime)}
}

// Drain fails Envoy's health checks, drains its listeners and waits out w
// (AwaitDrain); Skip cuts it short. Without an admin API it ends at once:
// Envoy is to be stopped now.
func (s *Supervisor) Drain(admin DrainAdmin, proc Process, w Window, tick func()) DrainEnd {
	ctx, cancel := context.WithDeadline(context.Background(), w.Deadline.Add(time.Second))
	defer cancel()
	if err := admin.FailHealthChecks(ctx); err != nil {
		select {
		case <-proc.Done():
			s.Log.Info("Envoy stopped before the drain finished", zap.String("status", proc.ExitDescription()))
			return DrainEnvoyExited
		default:
		}
		s.Log.Warn("cannot start the drain through Envoy's admin API; stopping Envoy now", zap.Error(err))
		return DrainNoAdmin
	}
	if err := admin.DrainListeners(ctx); err != nil {
		s.Log.Warn("cannot drain Envoy's listeners; waiting the drain time anyway", zap.Error(err))
	}
	end := s.AwaitDrain(ctx, admin, proc, w, s.Skip, tick)
	if end == DrainCancelled {
		s.Log.Info("second stop signal: skipping the rest of the drain")
		return DrainSkipped
	}
	return end
}

// AwaitDrain waits out w: until the listeners have been quiet for
// DrainQuiet after w.Earliest, w.Deadline, Envoy's exit, or cancel
// (DrainCancelled). tick runs every DrainTick.
func (s *Supervisor) AwaitDrain(ctx context.Context, admin DrainAdmin, proc Process, w Window, cancel <-chan struct{}, tick func()) DrainEnd {
	ticker := time.NewTicker(DrainTick)
	defer ticker.Stop()
	end := time.NewTimer(time.Until(w.Deadline))
	defer end.Stop()
	var idleSince time.Time // zero while connections remain
	var lastErr string
	for {
		now := time.Now()
		n, err := s.connections(ctx, admin, &lastErr)
		switch {
		case err != nil || n > 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = now
		}
		if !idleSince.IsZero() && now.Sub(idleSince) >= DrainQuiet && !now.Before(w.Earliest) {
			s.Log.Info("no downstream connections left; ending the drain early", zap.Duration("after", now.Sub(w.Start).Round(time.Millisecond)))
			return DrainIdle
		}
		select {
		case <-end.C:
			s.Log.Info("drain time is over")
			return DrainTimeUp
		case <-cancel:
			return DrainCancelled
		case <-proc.Done():
			s.Log.Info("Envoy stopped before the drain finished", zap.String("status", proc.ExitDescription()))
			return DrainEnvoyExited
		case <-ticker.C:
			tick()
		}
	}
}

// connections reads Envoy's count, logging it at debug and a failure to
// read it at warn (once per distinct error).
func (s *Supervisor) connections(ctx context.Context, admin DrainAdmin, lastErr *string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, adminBudget)
	defer cancel()
	n, err := admin.DownstreamConnections(ctx)
	if err != nil {
		if err.Error() != *lastErr {
			*lastErr = err.Error()
			s.Log.Warn("cannot read Envoy's connection count during the drain", zap.Error(err))
		}
		return 0, err
	}
	*lastErr = ""
	s.Log.Debug("draining", zap.Int("connections", n))
	return n, nil
}
