// Package agent is the linear story of one zone proxy: preflight, bootstrap
// (waiting for the mesh), start Envoy, wait for LIVE, serve, and on stop
// drain, stop and clean up. It owns the state every observer reads.
package agent

import (
	"context"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
	"github.com/zoneproxy/zoneproxy/pkg/host/sdjob"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/localserver"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
	"github.com/zoneproxy/zoneproxy/pkg/version"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// StopGrace is how long Envoy gets between SIGTERM and SIGKILL.
const StopGrace = supervise.StopGrace

// AfterDrain is the most a stop may take past the drain deadline: Envoy's
// stop, then the cache's last write. systemd's stop timeout must cover it.
const AfterDrain = StopGrace + xds.CacheFlushTimeout

// Options wire the agent to its surroundings.
type Options struct {
	Config *config.Config
	Log    *zap.Logger
	// LogLevel is Log's level, which POST /logging changes. Zero is a
	// level of its own, at info.
	LogLevel zap.AtomicLevel
	// Signals are the process's, caught by CatchSignals; nil is none: only
	// Run's ctx stops the agent.
	Signals *Signals
	// Envoy finds, starts and talks to Envoy; nil runs the binary
	// --envoy-binary names.
	Envoy Envoy
	// Tracker holds the state every observer reads; nil is a new one.
	Tracker *state.Tracker
	// Clock paces bootstrap retries; nil is the wall clock.
	Clock backoff.Clock
	// Metrics counts bootstrap attempts and Envoy's life and is served on
	// /metrics; nil is a new set.
	Metrics *metrics.Metrics
	// Handover is what the agent's previous program in this process handed
	// over (a reload, pkg/upgrade/inplace); nil on a fresh start.
	Handover *reexec.Handover
	// StartXDS starts Envoy's configuration stream; nil is xds.Start.
	StartXDS StartXDS
	// StopJob says whether systemd's job is a restart; nil asks systemd
	// over D-Bus (restart.go).
	StopJob StopJob
}

// Agent runs one zone proxy.
type Agent struct {
	opts    Options
	cfg     *config.Config
	log     *zap.Logger
	tracker *state.Tracker
	envoy   Envoy
	sup     *supervise.Supervisor // starts, drains and stops Envoy
	ready   *localserver.Server

	// skipDrain is closed on a second stop signal: skip the rest of the
	// drain (and of an egress's withdrawal).
	skipDrain chan struct{}
	// stopAs is what the stop is for: a restart or a stop (restart.go).
	stopAs *stopIntent

	token *xds.Token // the last one sent is redacted from Envoy's output

	xds   xdsSlot // Envoy's configuration stream, set before Envoy starts
	caPEM []byte  // --ca-cert-file as read at start; nil for none

	maint        maintenance // `zoneproxy drain`/`undrain`, SIGUSR2
	failingSince time.Time   // Envoy's health checks fail since: a maintenance drain
	// egressWithdrawn: kuma-cp hands this egress to no sidecar (withdraw.go).
	egressWithdrawn bool
	// stateDirPath is --state-dir once opened and locked; "" for none.
	stateDirPath string
	listeners    *listenwatch.Watch // Envoy's zone listeners, and the binds it rejected
	up           *inplace.Upgrades  // reloads and Envoy handovers
	follow       protocolFollow     // follow.go: the control plane's ADS protocol
}

// New returns an agent for a validated configuration.
func New(o Options) *Agent {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.LogLevel == (zap.AtomicLevel{}) {
		o.LogLevel = zap.NewAtomicLevel()
	}
	if o.Envoy == nil {
		o.Envoy = supervise.Binary{}
	}
	if o.StartXDS == nil {
		o.StartXDS = startRealXDS
	}
	if o.StopJob == nil {
		o.StopJob = sdjob.Asker{}.Restarting
	}
	if o.Tracker == nil {
		o.Tracker = state.NewTracker()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(o.Tracker)
	}
	a := &Agent{opts: o, cfg: o.Config, log: o.Log, tracker: o.Tracker, envoy: o.Envoy, skipDrain: make(chan struct{}), stopAs: newStopIntent()}
	a.sup = &supervise.Supervisor{Envoy: o.Envoy, Log: o.Log, Grace: StopGrace, Skip: a.skipDrain}
	a.token = &xds.Token{Expiry: o.Metrics.SetTokenExpiry}
	if c := o.Config; c != nil {
		a.token.Inline, a.token.File = c.DataplaneToken, c.DataplaneTokenFile
	}
	a.maint.kick = make(chan struct{}, 1)
	var handed upgrade.Handover // nil, not a nil *reexec.Handover, on a fresh start
	if o.Handover != nil {
		handed = o.Handover
	}
	a.up = inplace.New(inplace.Host{Config: o.Config, Log: o.Log, Tracker: o.Tracker, Metrics: o.Metrics, Sup: a.sup,
		Handover: handed, Skip: a.skipDrain, Serving: a.maint.serving.Load, Drained: a.maint.want.Load,
		FindEnvoy: a.findEnvoyBinary, Feature: a.xds.feature, Restate: a.refreshServing,
		Serves: func(admin EnvoyAdmin) {
			a.ready.SetEnvoyProbe(admin.Ready)
			a.opts.Metrics.EnvoyStarted(admin.PrometheusStats)
		}})
	a.listeners = newListenWatch(a)
	a.follow.up = a.up
	if c := o.Config; c != nil {
		o.Metrics.SetIdentity(c.Mesh, string(c.Role), c.Name)
	}
	return a
}

// Run blocks until the zone proxy stops, and logs why. A stop signal
// (Options.Signals) or cancelling ctx stops it. The error's exit code is
// exitcode.Of(err). Every way out:
//
//  1. A stop (SIGTERM, SIGINT, SIGHUP) while waiting for the mesh, the
//     control plane or `envoy --version`: nil, at once.
//  2. A stop while Envoy starts: Envoy is stopped without a drain; nil.
//  3. A stop while serving: a zone egress first leaves kuma-cp's egress set
//     (withdraw.go) unless the stop is a restart (restart.go), then Envoy fails its health checks and drains
//     (--drain-min to --drain-time; a second stop signal cuts both
//     short), then Envoy is stopped (SIGTERM, SIGKILL after StopGrace)
//     and the cache written; nil. So also during DRAINED.
//  4. Envoy exits by itself while serving: ErrEnvoyExited (exit 1), so the
//     supervisor restarts both; during a stop it is a clean stop (nil).
//  5. A configuration the control plane refuses for good, an untrusted or
//     shared work or state dir, a port refused, a broken --envoy-binary:
//     exit 78, before Envoy starts.
//  6. What a restart may cure before Envoy starts (a port in use, an
//     address not up yet, a full disk, --bootstrap-timeout, Envoy failing
//     to start): exit 1.
//  7. A reload (pkg/upgrade/inplace) does not return: the process goes
//     on in the new program, whose Run adopts what this one handed over.
//     If it cannot (the Envoy handed over is gone), exit 1; Envoy ends
//     with the process, and systemd restarts both.
//
// A maintenance drain (`zoneproxy drain`, SIGUSR2), an undrain and a zone
// port freed after a failed bind restart Envoy in place; none of them
// ends Run; nor do a third stop signal or SIGUSR2 once stopping, nor a
// refused or failed reload. Meanwhile
// systemd hears the state (sd_notify), and its watchdog is fed while no
// Envoy runs yet or Envoy is alive and its admin API answers.
func (a *Agent) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	followed := a.followSignals(a.opts.Signals, stop, done)
	defer func() {
		close(done)
		<-followed
		if a.opts.Signals != nil {
			a.opts.Signals.release()
		}
	}()
	notified := a.notifySystemd()
	a.log.Info("starting", zap.String("version", version.Version), zap.String("mesh", a.cfg.Mesh),
		zap.String("role", string(a.cfg.Role)), zap.String("name", a.cfg.Name), zap.String("address", a.cfg.Address),
		zap.String("clock", clockState(timesync.Check())))
	err := a.run(ctx)
	<-notified // the last STATUS= line reaches systemd before exit
	switch {
	case err == nil:
		a.log.Info("stopped")
	case exitcode.IsConfig(err):
		a.log.Error("cannot run: " + err.Error())
	default:
		a.log.Error("failed: " + err.Error())
	}
	return err
}

// clockState is the system clock's NTP state for the start-up line: what
// decides whether an expired token or certificate is final.
func clockState(s timesync.Status) string {
	switch {
	case s.Synced:
		return "synchronised"
	case s.Err != nil:
		return "unknown (" + s.Err.Error() + ")"
	}
	return "not synchronised"
}

// run is the story Run tells: preflight, bootstrap, Envoy, the stop.
func (a *Agent) run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			a.tracker.Set(state.Failed, err.Error())
		} else {
			a.tracker.Set(state.Stopped, "stopped")
		}
	}()

	if err := a.up.Take(); err != nil {
		return err
	}
	client, err := bootstrap.NewClientFor(a.cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	a.caPEM = client.CAPEM()
	wd, err := a.openWorkDir()
	if err != nil {
		return err
	}
	defer wd.cleanup()
	state, err := a.openStateDir()
	if err != nil {
		return err
	}
	defer state.close()
	if state != nil {
		a.stateDirPath = state.dir.Path()
		a.up.KeepStateDir(upgrade.Dir{Path: state.dir.Path(), File: state.dir.File(), Lock: state.lock})
	}
	if wd.leftBootstrap {
		// Its ports would make the port check below refuse to start.
		left := envoy.EndLeftovers(wd.file(bootstrapFile), 5*time.Second)
		left = append(left, envoy.EndLeftovers(wd.file(upgrade.SlotBBootstrapFile), 5*time.Second)...)
		if len(left) > 0 {
			a.log.Warn("ended the Envoy an earlier agent on this work dir left running (killed outright while a wrapper had not exec'd Envoy)",
				zap.Ints("pids", left))
		}
	}

	rp := preflight.ReadinessPort(a.cfg)
	ln, err := a.up.Listen(rp)
	if err != nil {
		return portFailure(preflight.PortError(rp, err))
	}
	rs := localserver.New(ln, a.tracker)
	// The listeners other hosts may reach, each serving one thing.
	for _, extra := range []struct {
		port  func(*config.Config) (preflight.Port, bool)
		serve func(net.Listener)
		what  string
	}{
		{preflight.MetricsPort, rs.ServeMetricsOn, "serving /metrics for scrapers"},
		{preflight.HealthPort, rs.ServeHealthOn, "serving /ready for load balancers"},
	} {
		p, ok := extra.port(a.cfg)
		if !ok {
			continue
		}
		eln, err := a.up.Listen(p)
		if err != nil {
			_ = rs.Close()
			return portFailure(preflight.PortError(p, err))
		}
		extra.serve(eln)
		a.log.Info(extra.what, zap.String("address", eln.Addr().String()))
	}
	a.ready = rs
	rs.Handle("/status", a.statusHandler())
	rs.HandleMetrics(a.opts.Metrics)
	rs.Handle("/logging", loggingHandler(a.opts.LogLevel, a.sup.Now, a.log))
	rs.HandleMaintenance(localserver.Maintenance{Drain: a.Drain, Undrain: a.Undrain})
	rs.Handle("/envoy/handover", a.up.Handler())
	rs.HandleReload(a.up.Reload)
	rs.SetGenerations(a.up.Record().Words)
	go func() {
		if err := rs.Serve(); err != nil {
			a.log.Error("readiness endpoint stopped", zap.Error(err))
		}
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = rs.Shutdown(sctx)
	}()

	// An adopted Envoy holds its ports already.
	if !a.up.Taken().AdoptsEnvoy() {
		if err := preflight.CheckFree(preflight.Ports(a.cfg)...); err != nil {
			return portFailure(err)
		}
	}
	envoyPath, envoyVersion, err := a.findEnvoy(ctx)
	// An adopted Envoy serves already: a stop right after the reload drains
	// it (runEnvoy), as the previous program would have.
	if ctx.Err() != nil && !a.up.Taken().AdoptsEnvoy() {
		a.log.Info("stopped while checking Envoy's version")
		return nil // a stop signal is not a broken --envoy-binary
	}
	if err != nil {
		return err
	}

	cache, err := a.openCache(state)
	if err != nil {
		return err
	}
	defer cache.Close()
	// The sockets and the FIFO Envoy needs are made while the request is
	// in flight; what Envoy's launch does not take is removed on return.
	prep := a.prepareLaunch(wd)
	defer prep.release()
	doc, cached, err := a.bootstrapOrResume(ctx, wd, envoyVersion, cache, client)
	if err != nil || (doc == nil && cached == nil) {
		return err // nothing: stopped while waiting
	}
	return a.runEnvoy(ctx, wd, envoyPath, envoyVersion, doc, cached, cache, prep)
}

// findEnvoy locates Envoy and reads its version, kept in the state dir
// while the binary is unchanged: running Envoy's large binary only to
// print its version is a good part of a warm start. A binary that is
// missing or is no Envoy is exit 78; a `--version` that timed out or was
// killed may pass after a restart: exit 1.
func (a *Agent) findEnvoy(ctx context.Context) (string, envoy.Version, error) {
	// An adopted Envoy's binary, as the previous program found it: the
	// file may have been upgraded since.
	if e := a.up.Taken().Envoy(); e != nil {
		return e.Path, e.Version, nil
	}
	return a.findEnvoyBinary(ctx)
}

// findEnvoyBinary is findEnvoy for --envoy-binary as it is now, not the
// adopted Envoy's: what a new Envoy of a handover runs.
func (a *Agent) findEnvoyBinary(ctx context.Context) (string, envoy.Version, error) {
	path, found, err := a.envoy.Find(ctx, a.cfg.EnvoyBinary, a.stateDirPath)
	if envoy.IsTransient(err) {
		return "", envoy.Version{}, err
	}
	if err != nil {
		return "", envoy.Version{}, exitcode.AsConfig(err)
	}
	v, warning := found.Version, found.Unread
	if warning != nil {
		a.log.Warn("cannot read Envoy's version; the control plane will see \"unknown\"", zap.String("path", path), zap.Error(warning))
	}
	if found.SaveErr != nil {
		a.log.Warn("cannot keep Envoy's version in the state dir; `envoy --version` runs at every start", zap.Error(found.SaveErr))
	}
	a.log.Info("found Envoy", zap.String("path", path), zap.String("version", v.Version), zap.Bool("version-cached", found.Cached))
	if warning == nil && !version.EnvoyCompatible(v.Version) {
		a.log.Warn("Envoy "+v.Version+" is not a version the supported Kuma releases are built and tested with ("+version.ExpectedEnvoy()+"); it may work, and the control plane shows it as incompatible",
			zap.String("path", path))
	}
	return path, v, nil
}

// portFailure: a port in use may be freed (its holder, named in err, may
// be a squatter that took it first: exiting 78 would leave it standing in
// for the agent for good) and an address not on this host yet may come up,
// so a restart retries (exit 1); a port refused (permission denied: below
// 1024 without the capability) is the configuration's to fix (78).
func portFailure(err error) error {
	if preflight.Transient(err) {
		return err
	}
	return exitcode.AsConfig(err)
}
