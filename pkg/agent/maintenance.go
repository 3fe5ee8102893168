package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// A maintenance drain (`zoneproxy drain`, SIGUSR2) takes the proxy out of
// rotation without stopping it: Envoy fails its health checks, drains, and
// its listeners close; the agent and Envoy keep running. Envoy cannot open
// a stopped listener again (not even one LDS sends anew), so an undrain
// restarts Envoy in place from the same bootstrap.

// maintenance is what operators asked for: drained or not. The serve loop
// reconciles Envoy with it whenever kicked.
type maintenance struct {
	want    atomic.Bool
	serving atomic.Bool   // a live Envoy is supervised: a drain can be done
	kick    chan struct{} // capacity 1: a request is pending
}

// ErrNotServing refuses a drain while Envoy is not live yet: it serves
// nothing to drain, and load balancers see it unhealthy anyway.
var ErrNotServing = errors.New("not serving yet")

// Drain asks for a maintenance drain; it returns at once. The tracker says
// DRAINING, then DRAINED.
func (a *Agent) Drain() error {
	if !a.maint.serving.Load() {
		snap := a.tracker.Current()
		return fmt.Errorf("%w (%s: %s): nothing to drain; drain once /ready says READY or NO_ZONE_LISTENER",
			ErrNotServing, snap.Phase, strings.ReplaceAll(snap.Detail, "\n", " "))
	}
	a.maint.want.Store(true)
	a.maint.poke()
	return nil
}

// Undrain asks to serve again; without a drain it changes nothing.
func (a *Agent) Undrain() {
	a.maint.want.Store(false)
	a.maint.poke()
}

func (m *maintenance) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// serveEnd says why a serving period ended.
type serveEnd int

const (
	endStop serveEnd = iota
	endExited
	endDrain
	endUndrain
	endHandover // a handover was asked for (pkg/upgrade/inplace)
	endRebind   // a zone listener's port is free again: Envoy restarts to bind it
)

// serve supervises a live Envoy until the stop: READY or NO_ZONE_LISTENER
// while serving, DRAINING and DRAINED on request, and back.
func (a *Agent) serve(ctx context.Context, e *supervised) error {
	a.maint.serving.Store(true)
	defer a.maint.serving.Store(false)
	defer a.up.EndRetirements()
	for {
		end, req := a.watchListeners(ctx, e)
		if end == endHandover {
			a.up.Handover(ctx, e, req)
			continue
		}
		if end == endDrain {
			end = a.maintenanceDrain(ctx, e)
		}
		switch end {
		case endExited:
			return a.envoyExited(ctx, e.Proc)
		case endRebind:
			if err := a.restartForBind(ctx, e); err != nil || ctx.Err() != nil {
				return err
			}
			continue
		case endStop:
			a.stopServing(e) // restart.go: a restart does not withdraw
			return nil
		}
		// Always: a withdrawal that failed half way must not keep the
		// next Envoy from its stream (Rejoin is a no-op otherwise).
		a.xds.rejoin()
		a.egressWithdrawn = false
		// An undrain: a drained Envoy never accepts connections again.
		a.log.Info("undrain: restarting Envoy, since a drained Envoy never accepts connections again", zap.Int("pid", e.Proc.PID()))
		a.failingSince = time.Time{}
		if err := a.restartInPlace(ctx, e, "undraining: restarting Envoy", "after the undrain", func() { a.listeners.Restarted(time.Now()) }); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// watchListeners keeps READY honest until a stop, Envoy's exit, a drain
// or a handover asked for (the request).
func (a *Agent) watchListeners(ctx context.Context, e *supervised) (serveEnd, upgrade.Request) {
	watch := a.listeners.Serving(e.Admin, e.Proc.PID())
	watch.Check(ctx)
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); watch.Run(wctx) }()
	// The watcher sets READY/NO_ZONE_LISTENER: it is gone before the caller
	// sets DRAINING or TERMINATING.
	defer func() { stopWatch(); <-watched }()
	for {
		if a.maint.want.Load() {
			return endDrain, upgrade.Request{}
		}
		select {
		case <-e.Proc.Done():
			return endExited, upgrade.Request{}
		case <-ctx.Done():
			return endStop, upgrade.Request{}
		case <-a.maint.kick:
		case <-watch.RebindDue():
			// A zone listener Envoy rejected can be bound now.
			return endRebind, upgrade.Request{}
		case req := <-a.up.Requests():
			return endHandover, req
		}
	}
}

// maintenanceDrain drains like a stop does, then closes the listeners and
// stays DRAINED until a stop, Envoy's exit or an undrain.
func (a *Agent) maintenanceDrain(ctx context.Context, e *supervised) serveEnd {
	if a.cfg.Role.HasEgress() && a.xds.get() != nil {
		a.tracker.Set(state.Draining, withdrawingWords("draining for maintenance"))
		a.egressWithdrawn = a.xds.withdrawEgress(true, ctx.Done(), a.tracker)
	}
	a.failingSince = time.Now()
	w := supervise.NewWindow(a.failingSince, a.cfg.DrainMin, a.cfg.DrainTime)
	a.tracker.Set(state.Draining, maintenanceDetail(w.Deadline))
	a.log.Info("draining for maintenance: Envoy fails its health checks and drains; it keeps running until `zoneproxy undrain` or a stop",
		zap.Duration("drain-time", a.cfg.DrainTime), zap.Duration("drain-min", min(a.cfg.DrainMin, a.cfg.DrainTime)))
	actx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Admin.FailHealthChecks(actx); err != nil {
		a.log.Warn("cannot fail Envoy's health checks for the maintenance drain", zap.Error(err))
	}
	if err := e.Admin.DrainListeners(actx); err != nil {
		a.log.Warn("cannot drain Envoy's listeners for the maintenance drain", zap.Error(err))
	}
	// A stop or an undrain cuts the wait short; the watcher is gone before
	// the DRAINED wait reads kicks itself.
	interrupt, done, gone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gone)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
			case <-a.maint.kick:
				if a.maint.want.Load() {
					continue
				}
			}
			close(interrupt)
			return
		}
	}()
	end := a.sup.AwaitDrain(actx, e.Admin, e.Proc, w, interrupt, func() { a.tracker.Set(state.Draining, maintenanceDetail(w.Deadline)) })
	close(done)
	<-gone
	switch end {
	case supervise.DrainEnvoyExited:
		return endExited
	case supervise.DrainCancelled:
		if ctx.Err() != nil {
			return endStop
		}
		return endUndrain
	}
	// Closed now rather than at the end of Envoy's own drain period: new
	// connections are refused, so clients go elsewhere at once.
	if err := e.Admin.StopListeners(actx); err != nil {
		a.log.Warn("cannot close Envoy's listeners; they close by themselves at the end of Envoy's drain period", zap.Error(err))
	}
	open, err := e.Admin.DownstreamConnections(actx)
	since := time.Now()
	detail := fmt.Sprintf("drained for maintenance since %s: Envoy fails its health checks and accepts no new connection; run `zoneproxy undrain` to serve again",
		since.UTC().Format(time.RFC3339))
	if err == nil && open > 0 {
		detail += fmt.Sprintf(" (%d connections still open)", open)
	}
	a.tracker.Set(state.Drained, detail)
	a.log.Info("drained: out of rotation until `zoneproxy undrain`; Envoy keeps running",
		zap.Int("connections open", open), zap.Duration("after", since.Sub(w.Start).Round(time.Millisecond)))
	for {
		if !a.maint.want.Load() {
			return endUndrain
		}
		select {
		case <-ctx.Done():
			return endStop
		case <-e.Proc.Done():
			return endExited
		case <-a.maint.kick:
		}
	}
}

func maintenanceDetail(deadline time.Time) string {
	return fmt.Sprintf("draining for maintenance (at most %s left); run `zoneproxy undrain` to serve again", max(0, time.Until(deadline)).Round(time.Second))
}

// restartInPlace replaces the serving Envoy with a new one from the same
// bootstrap (after an undrain, or for a port free again; detail says why,
// in the tracker); its configuration comes through the relay (the control
// plane, or the cache while it is away) or, in direct mode, from the
// control plane. Between the stop and the start, stopped runs. It returns
// once the new one is LIVE (done names the reason in the ready line), or
// nil on a stop meanwhile.
func (a *Agent) restartInPlace(ctx context.Context, e *supervised, detail, done string, stopped func()) error {
	a.tracker.Set(state.EnvoyStarting, detail)
	if err := a.sup.Restart(e, stopped); err != nil {
		return err
	}
	proc := e.Proc
	started := time.Now()
	if err := a.awaitLive(ctx, e.Admin, proc); err != nil {
		return err
	}
	if ctx.Err() != nil {
		a.stop(proc, "stopped before Envoy was ready")
		return nil
	}
	a.log.Info("Envoy ready again "+done, zap.Duration("after", time.Since(started).Round(time.Millisecond)))
	return nil
}
