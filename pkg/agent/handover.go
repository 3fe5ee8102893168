package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/host/reuseport"
)

// An Envoy handover replaces the running Envoy without dropping a
// connection (docs/operator-guide.md, "Envoy upgrades and bootstrap changes
// without a dropped connection"): a new Envoy starts beside the old one
// with its own admin socket and bootstrap copy, binds the zone listeners
// through SO_REUSEPORT, and is fed by the relay from what the old one
// holds; once it is LIVE with every zone listener, the relay moves the
// control plane's one stream to it (pkg/xds/relay/handover.go), and the old
// Envoy stops accepting, drains and exits. If the new Envoy fails, it is
// ended and the old one serves on. /ready stays 200 throughout.

// Handover files: generations alternate between the bootstrap's own admin
// socket and bootstrap file and these, so that the old and the new Envoy
// never share one.
const (
	handoverBootstrapFile = "bootstrap-handover.yaml"
	handoverAdminSocket   = "zoneproxy-envoy-admin-handover.sock"
)

// handoverLiveTimeout bounds the new Envoy's way to LIVE with its zone
// listeners; handoverSwitchTimeout the wait for a quiet moment on the
// control plane's stream.
var (
	handoverLiveTimeout   = time.Minute
	handoverSwitchTimeout = 30 * time.Second
)

// handoverKit is what a handover needs of runEnvoy's launch.
type handoverKit struct {
	wd        *workDir
	bootstrap []byte
	xds       XDSFeature // nil in direct mode
	prep      *launchPrep
	opts      envoy.Options // ConfigPath set per generation
	spec      envoy.Spec    // Path and Args set per generation
	admin     envoy.AdminAddress
}

// handovers is the agent's handover state.
type handovers struct {
	kit        atomic.Pointer[handoverKit]
	requests   chan handoverRequest
	generation atomic.Int64 // of the Envoy serving now; 1 for the first
	retiring   sync.WaitGroup
	draining   atomic.Int32 // the old Envoy's pid while it drains
	quit       chan struct{}
	quitOnce   sync.Once
	metricOnce sync.Once
	results    carriedCounts // zoneproxy_envoy_handovers_total
}

type handoverRequest struct {
	reason string
	// bootstrap, when set, is the new Envoy's (rewritten) bootstrap in
	// place of the running one's.
	bootstrap []byte
	done      chan error
}

func (h *handovers) init(a *Agent) {
	h.metricOnce.Do(func() {
		h.requests = make(chan handoverRequest)
		h.quit = make(chan struct{})
		results := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zoneproxy_envoy_handovers_total",
			Help: "Envoy handovers (a new Envoy taking over from the running one without dropping connections), by result: success, or failed (the old Envoy serves on).",
		}, []string{"result"})
		results.WithLabelValues("success")
		results.WithLabelValues("failed")
		a.opts.Metrics.Register(results)
		h.results.register(results)
	})
}

// ErrHandoverRefused wraps why a handover cannot start now.
var ErrHandoverRefused = errors.New("cannot hand over to a new Envoy now")

// replaceEnvoy runs a new Envoy beside the running one and hands over to it
// (reason says why, in the log). It returns once the new Envoy serves and
// the old one drains, or with why not: the old one then serves on.
func (a *Agent) replaceEnvoy(ctx context.Context, reason string, bootstrap []byte) error {
	if !a.maint.serving.Load() {
		return fmt.Errorf("%w: no live Envoy is supervised yet", ErrHandoverRefused)
	}
	if a.maint.want.Load() {
		return fmt.Errorf("%w: drained for maintenance; `zoneproxy undrain` starts a new Envoy anyway", ErrHandoverRefused)
	}
	req := handoverRequest{reason: reason, bootstrap: bootstrap, done: make(chan error, 1)}
	select {
	case a.hand.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handoverAnswerWithin is how long POST /envoy/handover may wait for the
// outcome: the new Envoy's way to LIVE, the switch, and time to spare.
func handoverAnswerWithin() time.Duration {
	return handoverLiveTimeout + handoverSwitchTimeout + 30*time.Second
}

// handoverHandler is POST /envoy/handover on the loopback endpoint (only
// root or the agent's user, as /drain): hand over to a new Envoy from
// --envoy-binary now, and answer once it serves or failed.
func (a *Agent) handoverHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed: POST "+r.URL.Path, http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// The server's timeouts (30 s to write, 10 s to read, after which
		// the request's context ends) are shorter than a handover may be.
		rc := http.NewResponseController(w)
		until := time.Now().Add(handoverAnswerWithin())
		if err := errors.Join(rc.SetReadDeadline(until), rc.SetWriteDeadline(until)); err != nil {
			http.Error(w, "cannot wait for the handover on this connection: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if err := a.replaceEnvoy(r.Context(), "asked on "+r.URL.Path, nil); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "Envoy generation %d serves (pid %d); the old one drains\n", a.hand.generation.Load(), a.running.Load().proc.PID())
	})
}

// handover does one handover on the serve loop: e becomes the new Envoy.
func (a *Agent) handover(ctx context.Context, e *supervised, req handoverRequest) error {
	reason := req.reason
	kit := a.hand.kit.Load()
	switch {
	case kit == nil || kit.xds == nil:
		return fmt.Errorf("%w: it needs the xDS relay (--xds-relay), which feeds the new Envoy while kuma-cp keeps one stream", ErrHandoverRefused)
	case a.hand.draining.Load() != 0:
		return fmt.Errorf("%w: the previous handover's old Envoy (pid %d) still drains; try again once it exited", ErrHandoverRefused, a.hand.draining.Load())
	}
	if up, ok := kit.xds.FromControlPlane(); !ok {
		return fmt.Errorf("%w: the control plane's stream is %q, not connected; the new Envoy could not take it over", ErrHandoverRefused, up)
	}
	if req.bootstrap != nil {
		next := *kit
		next.bootstrap = req.bootstrap
		kit = &next
	}
	gen := a.hand.generation.Load() + 1
	log := a.log.With(zap.Int64("generation", gen), zap.Int("old pid", e.proc.PID()), zap.String("reason", reason))
	log.Info("Envoy handover: starting a new Envoy beside the running one")
	if v := reuseport.Check(); v.Warning != "" {
		log.Warn("Envoy handover: " + v.Warning)
	}
	started := time.Now()
	proc, admin, found, err := a.startNext(ctx, kit, gen, e.proc.PID())
	if err == nil {
		err = a.awaitNext(ctx, admin, proc)
	}
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, handoverSwitchTimeout)
		err = kit.xds.CompleteHandover(sctx)
		cancel()
		if err != nil {
			err = fmt.Errorf("the control plane's stream could not be moved to it: %w", err)
		}
	}
	kit.xds.EndHandover()
	if err == nil && req.bootstrap != nil {
		err = a.keepBootstrap(kit)
	}
	if err != nil {
		if proc != nil {
			proc.Stop(StopGrace)
		}
		if admin != nil {
			admin.Close()
		}
		if req.bootstrap != nil {
			a.restoreBootstrap(log)
		}
		a.hand.results.add("failed", 1)
		log.Error("Envoy handover failed; the old Envoy keeps serving", zap.Error(err))
		return fmt.Errorf("Envoy handover failed; the old Envoy (pid %d) keeps serving: %w", e.proc.PID(), err)
	}
	build := found.version.Build
	a.rl.hmu.Lock()
	a.rl.envoyPath, a.rl.envoyVer = found.path, found.version
	a.rl.hmu.Unlock()
	oldProc, oldAdmin := e.proc, e.admin
	e.proc, e.admin = proc, admin
	e.start = a.restartFrom(kit, gen, build)
	a.hand.generation.Store(gen)
	a.hand.kit.Store(kit)
	a.rl.launched(envoyLaunch(a.cfg))
	a.envoyNow.Store(&envoyRecord{proc: proc, build: build, generation: gen})
	a.running.Store(&runningEnvoy{admin: admin, proc: proc})
	a.ready.SetEnvoyProbe(admin.Ready)
	a.opts.Metrics.EnvoyStarted(admin.PrometheusStats)
	if client, ok := admin.(*envoy.Admin); ok {
		kit.prep.admin.Store(client)
	}
	a.hand.results.add("success", 1)
	log.Info("Envoy handover done: the new Envoy serves; the old one stops accepting, drains and exits",
		zap.Int("pid", proc.PID()), zap.String("build", build), zap.Duration("after", time.Since(started).Round(time.Millisecond)))
	a.hand.draining.Store(int32(oldProc.PID()))
	a.hand.retiring.Add(1)
	go func() {
		defer a.hand.retiring.Done()
		defer a.hand.draining.Store(0)
		a.retire(oldAdmin, oldProc, log)
	}()
	a.refreshServing()
	return nil
}

// startNext starts generation gen from --envoy-binary as it is now, on its
// own bootstrap copy and admin socket; serving is the old Envoy's pid.
func (a *Agent) startNext(ctx context.Context, kit *handoverKit, gen int64, serving int) (EnvoyProcess, EnvoyAdmin, foundEnvoy, error) {
	path, version, err := a.findEnvoyBinary(ctx)
	if err != nil {
		return nil, nil, foundEnvoy{}, err
	}
	found := foundEnvoy{path: path, version: version}
	spec, adminAddr, err := a.specFor(kit, gen, path)
	if err != nil {
		return nil, nil, found, err
	}
	admin := a.envoy.Admin(adminAddr)
	kit.xds.BeginHandover(serving)
	proc, err := a.envoy.Start(spec)
	if err != nil {
		admin.Close()
		return nil, nil, found, err
	}
	a.log.Info("started Envoy", zap.Int("pid", proc.PID()), zap.Int64("generation", gen), zap.Strings("args", spec.Args), zap.String("admin", adminAddr.String()))
	return proc, admin, found, nil
}

// foundEnvoy is the binary a handover started, and its version: what the
// next program is told the running Envoy is.
type foundEnvoy struct {
	path    string
	version envoy.Version
}

// handoverAdminPath is the admin socket of even generations, beside the
// bootstrap's own.
func handoverAdminPath(bootstrapAdmin envoy.AdminAddress) string {
	return filepath.Join(filepath.Dir(bootstrapAdmin.Socket), handoverAdminSocket)
}

// specFor is generation gen's launch: odd generations use the bootstrap's
// own admin socket and file, even ones the handover's.
func (a *Agent) specFor(kit *handoverKit, gen int64, path string) (envoy.Spec, envoy.AdminAddress, error) {
	doc, adminAddr, file := kit.bootstrap, kit.admin, bootstrapFile
	if gen%2 == 0 {
		if kit.admin.Socket == "" {
			return envoy.Spec{}, envoy.AdminAddress{}, errors.New("the bootstrap's admin API is on TCP " + kit.admin.TCP + ", which a second Envoy cannot share; kuma-cp puts it on a Unix socket when the bootstrap request names a work dir, as zoneproxy's does")
		}
		var err error
		if doc, adminAddr, err = envoy.WithAdminPipe(kit.bootstrap, handoverAdminPath(kit.admin)); err != nil {
			return envoy.Spec{}, envoy.AdminAddress{}, err
		}
		file = handoverBootstrapFile
	}
	cfgPath, err := kit.wd.write(file, doc)
	if err != nil {
		return envoy.Spec{}, envoy.AdminAddress{}, err
	}
	opts := kit.opts
	opts.ConfigPath = cfgPath
	spec := kit.spec
	spec.Path, spec.Args = path, envoy.Args(opts)
	return spec, adminAddr, nil
}

// restartFrom is how an undrain restarts generation gen in place.
func (a *Agent) restartFrom(kit *handoverKit, gen int64, build string) func() (EnvoyProcess, error) {
	return func() (EnvoyProcess, error) {
		path, _, err := a.findEnvoyBinary(context.Background())
		if err != nil {
			return nil, err
		}
		spec, _, err := a.specFor(kit, gen, path)
		if err != nil {
			return nil, err
		}
		p, err := a.envoy.Start(spec)
		if err != nil {
			return nil, err
		}
		a.envoyNow.Store(&envoyRecord{proc: p, build: build, generation: gen})
		a.running.Store(&runningEnvoy{admin: a.running.Load().admin, proc: p})
		a.log.Info("started Envoy", zap.Int("pid", p.PID()), zap.Int64("generation", gen), zap.Strings("args", spec.Args))
		return p, nil
	}
}

// awaitNext waits for the new Envoy to be LIVE with every zone listener.
func (a *Agent) awaitNext(ctx context.Context, admin EnvoyAdmin, proc EnvoyProcess) error {
	ctx, cancel := context.WithTimeout(ctx, handoverLiveTimeout)
	defer cancel()
	want := listenerNames(expectedListeners(a.cfg))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "its admin API does not answer"
	for {
		select {
		case <-proc.Done():
			return fmt.Errorf("the new Envoy exited (%s)", proc.ExitDescription())
		case <-ctx.Done():
			return fmt.Errorf("the new Envoy was not ready within %s: %s", handoverLiveTimeout, last)
		case <-tick.C:
		}
		word, live, err := admin.Ready(ctx)
		switch {
		case err != nil:
			continue
		case !live:
			last = "it reports " + word
			continue
		}
		have, err := admin.Listeners(ctx)
		if err != nil {
			continue
		}
		missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool {
			return slices.ContainsFunc(have, func(l envoy.Listener) bool { return l.Name == n })
		})
		if len(missing) == 0 {
			return nil
		}
		last = fmt.Sprintf("it is LIVE without the zone listeners %v (could it not bind them beside the old Envoy? both need enable_reuse_port)", missing)
	}
}

// retire stops the old Envoy's listeners (new connections go to the new
// Envoy), waits out the drain as a stop does, and ends it. Its health
// checks do not fail: /ready answers for the new Envoy.
func (a *Agent) retire(admin interface {
	drainAdmin
	listenerLister
}, proc EnvoyProcess, log *zap.Logger) {
	w := a.newDrainWindow(time.Time{})
	ctx, cancel := context.WithDeadline(context.Background(), w.deadline.Add(time.Second))
	defer cancel()
	if err := admin.DrainListeners(ctx); err != nil {
		log.Warn("Envoy handover: cannot start the old Envoy's drain", zap.Error(err))
	}
	if err := admin.StopListeners(ctx); err != nil {
		log.Warn("Envoy handover: cannot close the old Envoy's listeners; they close at the end of its drain time", zap.Error(err))
	}
	cut := make(chan struct{})
	go func() {
		select {
		case <-a.hand.quit:
		case <-a.skipDrain:
		case <-ctx.Done():
		}
		close(cut)
	}()
	end := a.awaitDrain(ctx, admin, proc, w, cut, func() {})
	if proc.Stop(StopGrace) {
		log.Warn("the old Envoy ignored SIGTERM; killed it", zap.Duration("after", StopGrace))
	}
	if c, ok := admin.(interface{ Close() }); ok {
		c.Close()
	}
	log.Info("the old Envoy exited after its drain", zap.String("drain", string(end)), zap.String("status", proc.ExitDescription()))
}

// endRetirements ends the old Envoys still draining, at once, and waits
// for them: the agent stops.
func (a *Agent) endRetirements() {
	a.hand.quitOnce.Do(func() { close(a.hand.quit) })
	a.hand.retiring.Wait()
}

// generationWords adds the Envoy's generation to the READY detail once a
// handover happened.
func (a *Agent) generationWords(detail string) string {
	if g := a.hand.generation.Load(); g > 1 {
		return fmt.Sprintf("%s (Envoy generation %d)", detail, g)
	}
	return detail
}
