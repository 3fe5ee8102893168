package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// An Envoy handover replaces the running Envoy without dropping a
// connection: a new Envoy in the other slot beside the serving one
// (upgrade.Swap, which says how). The agent decides when: asked on POST
// /envoy/handover, or after a reload (handover_reload.go), always on the
// serve loop.

// Slot B's files, which the work dir's clean-up removes too.
const (
	handoverBootstrapFile = upgrade.SlotBBootstrapFile
	handoverAdminSocket   = upgrade.SlotBAdminSocket
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
	wd     *workDir
	xds    XDSFeature // nil in direct mode
	prep   *launchPrep
	launch *upgrade.Launch
}

// handovers is the agent's handover state.
type handovers struct {
	kit      atomic.Pointer[handoverKit]
	requests upgrade.Requests
	// place is the serving Envoy's; nil before the first starts.
	place      atomic.Pointer[upgrade.Place]
	retiring   upgrade.Retirements
	metricOnce sync.Once
	results    upgrade.Counts // zoneproxy_envoy_handovers_total
}

func (h *handovers) init(a *Agent) {
	h.metricOnce.Do(func() {
		results := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zoneproxy_envoy_handovers_total",
			Help: "Envoy handovers (a new Envoy taking over from the running one without dropping connections), by result: success, or failed (the old Envoy serves on).",
		}, []string{"result"})
		results.WithLabelValues("success")
		results.WithLabelValues("failed")
		a.opts.Metrics.Register(results)
		h.results.Register(results)
	})
}

// serving is the serving Envoy's place: generation 0 before the first.
func (h *handovers) serving() upgrade.Place {
	if p := h.place.Load(); p != nil {
		return *p
	}
	return upgrade.Place{Slot: upgrade.SlotA}
}

// ErrHandoverRefused wraps why a handover cannot start now.
var ErrHandoverRefused = upgrade.ErrHandoverRefused

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
	return a.hand.requests.Ask(ctx, reason, bootstrap)
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
	return upgrade.Handler(handoverAnswerWithin(),
		func(ctx context.Context) error { return a.replaceEnvoy(ctx, "asked on /envoy/handover", nil) },
		func() string {
			return fmt.Sprintf("Envoy generation %d serves (pid %d); the old one drains", a.hand.serving().Generation, a.sup.Now().Proc.PID())
		})
}

// relayMove is the relay as a handover moves the control plane's stream.
type relayMove struct{ XDSFeature }

func (r relayMove) Takeable() (string, bool) {
	up, ok := r.FromControlPlane()
	return string(up), ok
}

// swap is how this agent starts a new Envoy for a handover.
func (a *Agent) swap(log *zap.Logger) upgrade.Swap[EnvoyProcess, EnvoyAdmin] {
	return upgrade.Swap[EnvoyProcess, EnvoyAdmin]{Log: log, Find: a.findEnvoyBinary, Start: a.envoy.Start, Admin: a.envoy.Admin,
		Want: listenwatch.Names(listenwatch.Expected(a.cfg)), LiveTimeout: handoverLiveTimeout, SwitchTimeout: handoverSwitchTimeout,
		Grace: StopGrace, Retiring: &a.hand.retiring}
}

// handover does one handover on the serve loop: e becomes the new Envoy.
func (a *Agent) handover(ctx context.Context, e *supervised, req upgrade.Request) error {
	kit := a.hand.kit.Load()
	var mover upgrade.Relay // nil: none, which the handover refuses
	if kit != nil && kit.xds != nil {
		mover = relayMove{kit.xds}
		if req.Bootstrap != nil {
			next := *kit
			next.launch = kit.launch.WithBootstrap(req.Bootstrap)
			kit = &next
		}
	}
	var commit func() error
	if req.Bootstrap != nil {
		commit = func() error { return a.keepBootstrap(kit) }
	}
	from := a.hand.serving()
	log := a.log.With(zap.Int64("generation", from.Next().Generation), zap.Int("old pid", e.Proc.PID()), zap.String("reason", req.Reason))
	started := time.Now()
	var launch *upgrade.Launch
	if kit != nil {
		launch = kit.launch
	}
	took, err := a.swap(log).Run(ctx, launch, mover, e.Proc.PID(), from, commit)
	switch {
	case errors.Is(err, ErrHandoverRefused):
		return err
	case err != nil:
		if req.Bootstrap != nil {
			a.restoreBootstrap(log)
		}
		a.hand.results.Add("failed", 1)
		log.Error("Envoy handover failed; the old Envoy keeps serving", zap.Error(err))
		return fmt.Errorf("Envoy handover failed; the old Envoy (pid %d) keeps serving: %w", e.Proc.PID(), err)
	}
	build := took.Version.Build
	a.rl.hmu.Lock()
	a.rl.envoyPath, a.rl.envoyVer = took.Path, took.Version
	a.rl.hmu.Unlock()
	oldAdmin, oldProc := e.Admin, e.Proc
	e.Proc, e.Admin = took.Proc, took.Admin
	e.Start = a.restartFrom(kit, took.Place, build)
	a.hand.place.Store(&took.Place)
	a.hand.kit.Store(kit)
	a.rl.launched(envoyLaunch(a.cfg))
	a.sup.Started(supervise.Current{Admin: took.Admin, Proc: took.Proc, Build: build, Generation: took.Place.Generation})
	a.ready.SetEnvoyProbe(took.Admin.Ready)
	a.opts.Metrics.EnvoyStarted(took.Admin.PrometheusStats)
	if client, ok := took.Admin.(*envoy.Admin); ok {
		kit.prep.admin.Store(client)
	}
	a.hand.results.Add("success", 1)
	log.Info("Envoy handover done: the new Envoy serves; the old one stops accepting, drains and exits",
		zap.Int("pid", took.Proc.PID()), zap.String("build", build), zap.Duration("after", time.Since(started).Round(time.Millisecond)))
	a.retire(oldAdmin, oldProc, log)
	a.refreshServing()
	return nil
}

// retire drains and ends the old Envoy as a stop does, in the background.
func (a *Agent) retire(admin interface {
	drainAdmin
	listenerLister
}, proc EnvoyProcess, log *zap.Logger) {
	w := supervise.NewWindow(time.Time{}, a.cfg.DrainMin, a.cfg.DrainTime)
	a.hand.retiring.Retire(upgrade.Old{Admin: admin, Proc: proc, Deadline: w.Deadline, Grace: StopGrace, Skip: a.skipDrain, Log: log,
		Await: func(ctx context.Context, cut <-chan struct{}) string {
			return string(a.sup.AwaitDrain(ctx, admin, proc, w, cut, func() {}))
		}})
}

// restartFrom is how an undrain restarts the Envoy at place in place, on
// its slot's files.
func (a *Agent) restartFrom(kit *handoverKit, at upgrade.Place, build string) func() (EnvoyProcess, error) {
	return func() (EnvoyProcess, error) {
		path, _, err := a.findEnvoyBinary(context.Background())
		if err != nil {
			return nil, err
		}
		spec, _, err := kit.launch.SpecFor(at.Slot, path)
		if err != nil {
			return nil, err
		}
		p, err := a.envoy.Start(spec)
		if err != nil {
			return nil, err
		}
		a.sup.Started(supervise.Current{Admin: a.sup.Now().Admin, Proc: p, Build: build, Generation: at.Generation})
		a.log.Info("started Envoy", zap.Int("pid", p.PID()), zap.Int64("generation", at.Generation), zap.Strings("args", spec.Args))
		return p, nil
	}
}

// generationWords adds the Envoy's generation to the READY detail once a
// handover happened.
func (a *Agent) generationWords(detail string) string {
	if g := a.hand.serving().Generation; g > 1 {
		return fmt.Sprintf("%s (Envoy generation %d)", detail, g)
	}
	return detail
}
