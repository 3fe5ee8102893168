// Package agent is the linear story of one zone proxy: preflight, bootstrap
// (waiting for the mesh), start Envoy, wait for LIVE, serve, and on stop
// drain, stop and clean up. It owns the state every observer reads.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/readiness"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// StopGrace is how long Envoy gets between SIGTERM and SIGKILL.
const StopGrace = 5 * time.Second

// Options wire the agent to its surroundings.
type Options struct {
	Config  *config.Config
	Log     *zap.Logger
	Tracker *state.Tracker
	// Hurry is closed on a second stop signal: skip the rest of the drain.
	Hurry <-chan struct{}
	// Clock paces bootstrap retries; nil is the wall clock.
	Clock bootstrap.Clock
	// OnReadiness lets the caller add endpoints (metrics, logging).
	OnReadiness func(*readiness.Server)
	// OnEnvoy is called once Envoy runs, with its admin client and process.
	OnEnvoy func(*envoy.Admin, *envoy.Process)
}

// Agent runs one zone proxy.
type Agent struct {
	opts    Options
	cfg     *config.Config
	log     *zap.Logger
	tracker *state.Tracker
}

// New returns an agent for a validated configuration.
func New(o Options) *Agent {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Tracker == nil {
		o.Tracker = state.NewTracker()
	}
	return &Agent{opts: o, cfg: o.Config, log: o.Log, tracker: o.Tracker}
}

// Run blocks until the zone proxy stops. Cancelling ctx is the stop
// signal. The error's exit code is exitcode.Of(err).
func (a *Agent) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			a.tracker.Set(state.Failed, err.Error())
		} else {
			a.tracker.Set(state.Stopped, "stopped")
		}
	}()

	wd, err := openWorkDir(a.cfg.WorkDir)
	if err != nil {
		return exitcode.AsConfig(err)
	}
	defer wd.cleanup()

	ln, err := readiness.Listen(a.cfg.ReadinessPort)
	if err != nil {
		return exitcode.AsConfig(err)
	}
	rs := readiness.New(ln, a.tracker)
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

	if err := a.checkPorts(); err != nil {
		return exitcode.AsConfig(err)
	}
	envoyPath, envoyVersion, err := a.findEnvoy(ctx)
	if err != nil {
		return exitcode.AsConfig(err)
	}

	doc, err := a.bootstrap(ctx, wd, envoyVersion)
	if err != nil || doc == nil {
		return err // nil doc: stopped while waiting
	}
	return a.runEnvoy(ctx, wd, envoyPath, doc)
}

// checkPorts finds ports other processes hold before anything is
// registered: Envoy would only fail on them much later, as a NACK.
func (a *Agent) checkPorts() error {
	type want struct {
		flag string
		port int
	}
	var wants []want
	if a.cfg.Role.HasIngress() {
		wants = append(wants, want{"ingress-port", a.cfg.IngressPort})
	}
	if a.cfg.Role.HasEgress() {
		wants = append(wants, want{"egress-port", a.cfg.EgressPort})
	}
	if ip := net.ParseIP(a.cfg.Address); ip == nil || !ip.IsLoopback() {
		// The control plane exposes Envoy's admin/readiness on address:admin-port.
		wants = append(wants, want{"admin-port", a.cfg.AdminPort})
	}
	for _, w := range wants {
		addr := net.JoinHostPort(a.cfg.Address, strconv.Itoa(w.port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("cannot bind %s for --%s (%v): free the port or set --%s to another one (or check --address is an IP of this host)", addr, w.flag, errors.Unwrap(err), w.flag)
		}
		l.Close()
	}
	return nil
}

func (a *Agent) findEnvoy(ctx context.Context) (string, envoy.Version, error) {
	path, err := envoy.Locate(a.cfg.EnvoyBinary)
	if err != nil {
		return "", envoy.Version{}, err
	}
	v, err := envoy.ReadVersion(ctx, path)
	var unparsed *envoy.UnparsedVersionError
	if errors.As(err, &unparsed) {
		a.log.Warn("cannot read Envoy's version; the control plane will see \"unknown\"", zap.String("path", path), zap.Error(err))
	} else if err != nil {
		return "", envoy.Version{}, err
	}
	a.log.Info("found Envoy", zap.String("path", path), zap.String("version", v.Version))
	return path, v, nil
}
