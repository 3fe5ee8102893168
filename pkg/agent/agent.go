// Package agent is the linear story of one zone proxy: preflight, bootstrap
// (waiting for the mesh), start Envoy, wait for LIVE, serve, and on stop
// drain, stop and clean up. It owns the state every observer reads.
package agent

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/localserver"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// StopGrace is how long Envoy gets between SIGTERM and SIGKILL.
const StopGrace = 5 * time.Second

// cacheFlushTimeout bounds the last write of the last-known-good cache
// once Envoy has stopped.
const cacheFlushTimeout = 5 * time.Second

// AfterDrain is the most a stop may take past the drain deadline: Envoy's
// stop, then the cache's last write. systemd's stop timeout must cover it.
const AfterDrain = StopGrace + cacheFlushTimeout

// Options wire the agent to its surroundings.
type Options struct {
	Config  *config.Config
	Log     *zap.Logger
	Tracker *state.Tracker
	// Hurry is closed on a second stop signal: skip the rest of the drain.
	Hurry <-chan struct{}
	// Clock paces bootstrap retries; nil is the wall clock.
	Clock backoff.Clock
	// OnReadiness lets the caller add endpoints (metrics, logging).
	OnReadiness func(*localserver.Server)
	// Metrics counts bootstrap attempts and Envoy's life; nil records nothing.
	Metrics *metrics.Metrics
	// OnEnvoy is called once Envoy runs, with its admin client and process.
	OnEnvoy func(*envoy.Admin, *envoy.Process)
}

// Agent runs one zone proxy.
type Agent struct {
	opts    Options
	cfg     *config.Config
	log     *zap.Logger
	tracker *state.Tracker
	ready   *localserver.Server

	tokenMu sync.Mutex
	token   string // the last one sent, redacted from Envoy's output

	xds   *relayWatch // the relay, nil in direct mode; set before Envoy starts
	xdsMu sync.Mutex  // guards xds for /status, which may ask before it is set

	maint        maintenance // `zoneproxy drain`/`undrain`, SIGUSR2
	failingSince time.Time   // Envoy's health checks fail since: a maintenance drain
	// egressWithdrawn: kuma-cp hands this egress to no sidecar (withdraw.go).
	egressWithdrawn bool
	// stateDirPath is --state-dir once opened and locked; "" for none.
	stateDirPath string
	binds        bindFailures                // zone listeners Envoy could not bind (bindfailure.go)
	envoyNow     atomic.Pointer[envoyRecord] // the Envoy started last, for /status
}

// New returns an agent for a validated configuration.
func New(o Options) *Agent {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Tracker == nil {
		o.Tracker = state.NewTracker()
	}
	a := &Agent{opts: o, cfg: o.Config, log: o.Log, tracker: o.Tracker}
	a.maint.kick = make(chan struct{}, 1)
	return a
}

// Run blocks until the zone proxy stops. Cancelling ctx is the stop
// signal. The error's exit code is exitcode.Of(err). Every way out:
//
//  1. A stop (ctx cancelled: SIGTERM, SIGINT, SIGHUP) while waiting for the
//     mesh, the control plane or `envoy --version`: nil, at once.
//  2. A stop while Envoy starts: Envoy is stopped without a drain; nil.
//  3. A stop while serving: a zone egress first leaves kuma-cp's egress set
//     (withdraw.go), then Envoy fails its health checks and drains
//     (--drain-min to --drain-time; a second signal, Options.Hurry, cuts
//     both short), then Envoy is stopped (SIGTERM, SIGKILL after
//     StopGrace) and the cache written; nil. So also during DRAINED.
//  4. Envoy exits by itself while serving: ErrEnvoyExited (exit 1), so the
//     supervisor restarts both; during a stop it is a clean stop (nil).
//  5. A configuration the control plane refuses for good, an untrusted or
//     shared work or state dir, a port refused, a broken --envoy-binary:
//     exit 78, before Envoy starts.
//  6. What a restart may cure before Envoy starts (a port in use, an
//     address not up yet, a full disk, --bootstrap-timeout, Envoy failing
//     to start): exit 1.
//
// A drain (`zoneproxy drain`), an undrain and a zone port freed after a
// failed bind restart Envoy in place; none of them ends Run.
func (a *Agent) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			a.tracker.Set(state.Failed, err.Error())
		} else {
			a.tracker.Set(state.Stopped, "stopped")
		}
	}()

	client, err := bootstrap.NewClientFor(a.cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	wd, err := openWorkDir(a.cfg.WorkDir)
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
	}
	if wd.leftBootstrap {
		// Its ports would make the port check below refuse to start.
		if left := envoy.EndLeftovers(wd.file(bootstrapFile), 5*time.Second); len(left) > 0 {
			a.log.Warn("ended the Envoy an earlier agent on this work dir left running (killed outright while a wrapper had not exec'd Envoy)",
				zap.Ints("pids", left))
		}
	}

	rp := preflight.ReadinessPort(a.cfg)
	ln, err := preflight.Listen(rp.Addr)
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
		eln, err := preflight.Listen(p.Addr)
		if err != nil {
			_ = rs.Close()
			return portFailure(preflight.PortError(p, err))
		}
		extra.serve(eln)
		a.log.Info(extra.what, zap.String("address", eln.Addr().String()))
	}
	a.ready = rs
	rs.Handle("/status", a.statusHandler())
	if a.opts.OnReadiness != nil {
		a.opts.OnReadiness(rs)
	}
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

	if err := preflight.CheckFree(preflight.Ports(a.cfg)...); err != nil {
		return portFailure(err)
	}
	envoyPath, envoyVersion, err := a.findEnvoy(ctx)
	if ctx.Err() != nil {
		a.log.Info("stopped while checking Envoy's version")
		return nil // a stop signal is not a broken --envoy-binary
	}
	if err != nil {
		if envoy.IsTransient(err) {
			return err // a restart may get past it: not 78
		}
		return exitcode.AsConfig(err)
	}

	cache, err := a.openCache(state)
	if err != nil {
		return err
	}
	defer closeCache(cache)
	// The sockets and the FIFO Envoy needs are made while the request is
	// in flight; what Envoy's launch does not take is removed on return.
	prep := a.prepareLaunch(wd)
	defer prep.release()
	doc, cached, err := a.bootstrap(ctx, wd, envoyVersion, cache, client)
	if err != nil || (doc == nil && cached == nil) {
		return err // nothing: stopped while waiting
	}
	return a.runEnvoy(ctx, wd, envoyPath, envoyVersion, doc, cached, cache, prep)
}

// findEnvoy locates Envoy and reads its version, kept in the state dir
// while the binary is unchanged: running Envoy's large binary only to
// print its version is a good part of a warm start.
func (a *Agent) findEnvoy(ctx context.Context) (string, envoy.Version, error) {
	path, err := envoy.Locate(a.cfg.EnvoyBinary)
	if err != nil {
		return "", envoy.Version{}, err
	}
	found, err := envoy.VersionCache{Dir: a.stateDirPath}.Read(ctx, path)
	if err != nil {
		return "", envoy.Version{}, err
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
		a.log.Warn("Envoy "+v.Version+" is not the version Kuma "+version.Kuma+" is built and tested with ("+version.ExpectedEnvoy()+"); it may work, and the control plane shows it as incompatible",
			zap.String("path", path))
	}
	return path, v, nil
}

// checkEnvoyBuild compares the build the running Envoy reports with the
// one the control plane was told. They differ when --envoy-binary is a
// wrapper whose Envoy was upgraded: the version cache is keyed on the
// wrapper's file and kept the old answer. It takes the new one, for the
// next start.
func (a *Agent) checkEnvoyBuild(ctx context.Context, admin *envoy.Admin, path string, told envoy.Version) {
	build, err := admin.Build(ctx)
	if err != nil || build == told.Build {
		return // nothing learnt: a busy admin
	}
	if e := a.envoyNow.Load(); e != nil {
		a.envoyNow.CompareAndSwap(e, &envoyRecord{proc: e.proc, build: build})
	}
	err = envoy.VersionCache{Dir: a.stateDirPath}.Correct(path, build)
	if errors.Is(err, envoy.ErrNotABuild) {
		return // a build the agent could not report either
	}
	a.log.Warn("the running Envoy reports another build than the control plane was told at start-up (is --envoy-binary a wrapper whose Envoy was upgraded?); the next start reports the running one",
		zap.String("told", told.Build), zap.String("running", build), zap.String("path", path))
	if err != nil {
		a.log.Warn("cannot correct Envoy's version in the state dir", zap.Error(err))
	}
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
