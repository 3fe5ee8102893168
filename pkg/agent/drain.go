package agent

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// drain is a stop's drain (supervise.Drain): --drain-time, which may end
// once drainMin has passed (so a load balancer has seen the failing
// health check) and the listeners are quiet; a second stop signal or
// Envoy's exit ends it. Health checks failing since a maintenance drain
// count toward drainMin.
func (a *Agent) drain(admin drainAdmin, proc EnvoyProcess, drainMin time.Duration) supervise.DrainEnd {
	w := supervise.NewWindow(a.failingSince, drainMin, a.cfg.DrainTime)
	a.tracker.SetDraining(a.drainDetail(w.Deadline), w.Deadline)
	a.log.Info("draining Envoy", zap.Duration("drain-time", a.cfg.DrainTime), zap.Duration("drain-min", min(drainMin, a.cfg.DrainTime)))
	return a.sup.Drain(admin, proc, w, func() { a.tracker.SetDraining(a.drainDetail(w.Deadline), w.Deadline) })
}

// drainDetail names a restart's drain as such.
func (a *Agent) drainDetail(deadline time.Time) string {
	d := fmt.Sprintf("draining (%s left)", time.Until(deadline).Round(time.Second))
	if k, ok := a.stopAs.settled(); ok && k.restart {
		return "restart: " + d
	}
	return d
}

// stop ends Envoy: SIGTERM, then SIGKILL after StopGrace.
func (a *Agent) stop(proc EnvoyProcess, why string) {
	a.tracker.Set(state.Terminating, "stopping Envoy")
	a.sup.Stop(proc, why)
}
