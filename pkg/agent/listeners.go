package agent

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
)

// The zone listeners' watch (listenwatch) says what READY means and asks
// for a restart of Envoy once a rejected port is free; the serve loop
// decides when it happens (maintenance.go).

// newListenWatch wires the watch to a's tracker, metrics and relay; a.xds
// is read at each use, since it is set only before Envoy starts.
func newListenWatch(a *Agent) *listenwatch.Watch {
	return listenwatch.New(listenwatch.Options{
		Config: a.cfg, Log: a.log, Tracker: a.tracker, Metrics: a.opts.Metrics,
		ReadyWords: func() string { return a.up.GenerationWords(a.xds.servingDetail()) },
		Configured: func() bool { return a.xds.newEnvoyConfigured() },
		Present:    a.xds.zoneListenersPresent,
	})
}

// restartForBind replaces Envoy with a new one from the same bootstrap, so
// that it binds a zone listener whose port is free again. Like the
// undrain's restart, it returns once the new one is LIVE, or nil on a stop
// meanwhile.
func (a *Agent) restartForBind(ctx context.Context, e *supervised) error {
	why := a.listeners.RestartReason()
	a.log.Info("restarting Envoy so that it binds "+why+", free again: Envoy does not retry a listener it rejected", zap.Int("pid", e.Proc.PID()))
	// What the old Envoy rejected is not the new one's.
	return a.restartInPlace(ctx, e, "restarting Envoy so that it binds "+why+", free again", "after the restart for "+why,
		func() { a.listeners.Restarted(time.Now()) })
}
