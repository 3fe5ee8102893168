package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// ErrEnvoyExited is wrapped when Envoy stops by itself.
var ErrEnvoyExited = errors.New("Envoy exited unexpectedly")

// runEnvoy launches Envoy on what prep made ready meanwhile.
func (a *Agent) runEnvoy(ctx context.Context, wd *workDir, envoyPath string, envoyVersion envoy.Version, doc []byte, cached *xds.Cached, cache *xds.Cache, prep *launchPrep) error {
	a.follow.ctx.Store(&ctx)
	f, err := a.startXDS(wd, doc, cached, cache, prep)
	if err != nil {
		return err
	}
	defer f.Close() // after Envoy is gone
	a.warnIfEnvoyReadsUntrimmedToken(f.Bootstrap())
	// An adopted Envoy runs in the slot it was handed over in: slot B's
	// admin socket and bootstrap copy after an odd number of handovers.
	place := a.up.Taken().Place()
	own := upgrade.Files{Bootstrap: bootstrapFile, Admin: f.Admin()}
	adminAddr := f.Admin()
	if files, err := place.Slot.FilesOf(own); err == nil {
		adminAddr = files.Admin
	}
	cfgPath, err := wd.write(bootstrapFile, f.Bootstrap())
	if err != nil {
		return err
	}
	admin := a.envoy.Admin(adminAddr)
	defer admin.Close()
	obs, err := prep.observability()
	if err != nil {
		return err
	}
	defer obs.close() // after Envoy is gone: it writes the FIFO to the end
	// MeshMetric and OTLP read /stats through the real client; a fake
	// Envoy's admin has none to give.
	if client, ok := admin.(*envoy.Admin); ok {
		prep.admin.Store(client)
	}
	obs.register()

	startedWords := "started Envoy"
	if a.up.Taken().AdoptsEnvoy() {
		startedWords = "supervising the running Envoy"
	} else {
		a.tracker.Set(state.EnvoyStarting, "Envoy starting")
	}
	// launch is how every Envoy of this program is launched; a handover's
	// gets its own ConfigPath (upgrade.Launch.SpecFor).
	launch := envoy.Options{DrainTime: a.cfg.DrainTime, LogLevel: a.cfg.EnvoyLogLevel, ComponentLogLevel: a.cfg.EnvoyComponentLogLevel,
		Concurrency: a.cfg.Concurrency, Extra: a.cfg.EnvoyArgs}
	withConfig := launch
	withConfig.ConfigPath = cfgPath
	args := envoy.Args(withConfig)
	envoyLog := a.log.Named("envoy")
	spec := envoy.Spec{
		Path: envoyPath, Args: args, Env: envoy.ChildEnv(), Dir: wd.path,
		Output: supervise.Output(envoyLog, a.token.Last),
	}
	// start runs Envoy: here, and again from the same bootstrap on an undrain.
	var proc EnvoyProcess
	start := func() (EnvoyProcess, error) {
		p, err := a.up.StartEnvoy(spec) // or adopt the one a reload handed over
		if err != nil {
			return nil, err
		}
		proc = p
		a.up.Started(place, nil)
		a.log.Info(startedWords, zap.Int("pid", p.PID()), zap.Strings("args", args), zap.String("admin", adminAddr.String()))
		a.sup.Started(supervise.Current{Admin: admin, Proc: p, Build: envoyVersion.Build, Generation: place.Generation})
		return p, nil
	}
	if _, err := start(); err != nil {
		return err
	}
	kit := &inplace.Kit{Relay: a.xds.get(), Socket: wd.file(xds.SocketName), Stats: &prep.admin,
		Launch: &upgrade.Launch{Write: wd.write, Bootstrap: f.Bootstrap(), A: own, Opts: launch, Spec: spec}}
	a.up.Started(place, kit)
	if place.Slot != upgrade.SlotA {
		// An undrain restarts the adopted Envoy on its slot's files.
		start = a.up.RestartFrom(kit, place, envoyVersion.Build)
	}
	// Whatever happens below, Envoy does not outlive this function.
	defer func() {
		if !proc.Exited() {
			proc.Stop(StopGrace)
		}
	}()
	if err := obs.poll(wd.path); err != nil {
		return err
	}
	a.ready.SetEnvoyProbe(admin.Ready)
	a.opts.Metrics.EnvoyStarted(admin.PrometheusStats)
	defer a.opts.Metrics.EnvoyExited()

	started := time.Now()
	if err := a.awaitLive(ctx, admin, proc); err != nil || ctx.Err() != nil {
		if err != nil {
			return err
		}
		if a.up.Taken().AdoptsEnvoy() {
			// Stopped right after a reload: the adopted Envoy served until
			// then, so it drains (and an egress withdraws) as it would have.
			return a.serve(ctx, &supervised{Admin: admin, Proc: proc, Start: start})
		}
		a.stop(proc, "stopped before Envoy was ready")
		return nil
	}
	a.log.Info("Envoy ready", zap.Duration("after", time.Since(started).Round(time.Millisecond)))
	go a.sup.CheckBuild(ctx, admin, envoyPath, a.stateDirPath, envoyVersion) // off READY's path
	if a.up.Taken().AdoptsEnvoy() {
		go a.up.RefreshAdopted(ctx)
	}
	return a.serve(ctx, &supervised{Admin: admin, Proc: proc, Start: start})
}

// awaitLive waits for Envoy's LIVE (supervise.AwaitLive), saying what
// keeps it. It returns an error only when Envoy exits by itself; a
// cancelled ctx returns nil.
func (a *Agent) awaitLive(ctx context.Context, admin drainAdmin, proc EnvoyProcess) error {
	exited := a.sup.AwaitLive(ctx, admin, proc, func(waited time.Duration, word string, err error) {
		reason := "its admin API does not answer yet"
		if err == nil {
			reason = "it reports " + word + "; it waits for its first configuration from the control plane over ADS (check the control plane's log for this proxy, e.g. a rejected token)"
			// The control plane's own refusal, when the relay saw one, says more.
			if refusal := a.xds.lastRefusal(); refusal != "" {
				reason = "it reports " + word + "; the control plane refused its configuration stream: " + refusal
			} else if a.xds.noListenersSent() {
				reason = "it reports " + word + "; " + xds.NoListenersWords(a.cfg.Role)
				a.tracker.Set(state.WaitingForControlPlane, "Envoy is running, but "+xds.NoListenersWords(a.cfg.Role))
			} else {
				a.tracker.Set(state.WaitingForControlPlane, fmt.Sprintf("Envoy is running but waits for its configuration from the control plane (%s for %s)", word, waited.Round(time.Second)))
			}
		}
		a.log.Warn("Envoy is not ready yet", zap.Duration("waited", waited.Round(time.Second)), zap.String("reason", reason))
	})
	if exited {
		return a.envoyExited(ctx, proc)
	}
	return nil
}

// envoyExited decides what Envoy's exit means. During a stop it is a clean
// stop; otherwise the agent fails so that systemd restarts both.
func (a *Agent) envoyExited(ctx context.Context, proc EnvoyProcess) error {
	if supervise.Stopping(ctx, proc) {
		a.log.Info("Envoy stopped before the drain finished", zap.String("status", proc.ExitDescription()))
		a.tracker.Set(state.Terminating, "Envoy stopped")
		return nil
	}
	desc := proc.ExitDescription()
	a.log.Error("Envoy exited unexpectedly; zoneproxy stops too so that its supervisor (systemd) restarts both",
		zap.String("status", desc), zap.Int("pid", proc.PID()))
	return fmt.Errorf("%w (%s)", ErrEnvoyExited, desc)
}
