package inplace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
// /envoy/handover, or after a reload (refresh.go), always on the serve
// loop (Handover).

// handoverLiveTimeout bounds the new Envoy's way to LIVE with its zone
// listeners; handoverSwitchTimeout the wait for a quiet moment on the
// control plane's stream.
var (
	handoverLiveTimeout   = time.Minute
	handoverSwitchTimeout = 30 * time.Second
)

func (u *Upgrades) registerHandovers() {
	results := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zoneproxy_envoy_handovers_total",
		Help: "Envoy handovers (a new Envoy taking over from the running one without dropping connections), by result: success, or failed (the old Envoy serves on).",
	}, []string{"result"})
	results.WithLabelValues("success")
	results.WithLabelValues("failed")
	u.h.Metrics.Register(results)
	u.results.Register(results)
}

// Started records where the serving Envoy runs and what a handover needs
// of its launch; a nil kit keeps the one recorded.
func (u *Upgrades) Started(at upgrade.Place, kit *Kit) {
	u.place.Store(&at)
	if kit != nil {
		u.kit.Store(kit)
	}
}

// Serving is the serving Envoy's place: generation 0 before the first.
func (u *Upgrades) Serving() upgrade.Place {
	if p := u.place.Load(); p != nil {
		return *p
	}
	return upgrade.Place{Slot: upgrade.SlotA}
}

// Requests are the handovers asked for, which the serve loop takes up
// (Handover).
func (u *Upgrades) Requests() <-chan upgrade.Request { return u.requests.C() }

// EndRetirements cuts the drains of the old Envoys short: the agent stops.
func (u *Upgrades) EndRetirements() { u.retiring.End() }

// GenerationWords adds the Envoy's generation to the READY detail once a
// handover happened.
func (u *Upgrades) GenerationWords(detail string) string {
	if g := u.Serving().Generation; g > 1 {
		return fmt.Sprintf("%s (Envoy generation %d)", detail, g)
	}
	return detail
}

// replaceEnvoy runs a new Envoy beside the running one and hands over to it
// (reason says why, in the log). It returns once the new Envoy serves and
// the old one drains, or with why not: the old one then serves on.
func (u *Upgrades) replaceEnvoy(ctx context.Context, reason string, bootstrap []byte) error {
	if !u.h.Serving() {
		return fmt.Errorf("%w: no live Envoy is supervised yet", upgrade.ErrHandoverRefused)
	}
	if u.h.Drained() {
		return fmt.Errorf("%w: drained for maintenance; `zoneproxy undrain` starts a new Envoy anyway", upgrade.ErrHandoverRefused)
	}
	return u.requests.Ask(ctx, reason, bootstrap)
}

// handoverAnswerWithin is how long POST /envoy/handover may wait for the
// outcome: the new Envoy's way to LIVE, the switch, and time to spare.
func handoverAnswerWithin() time.Duration {
	return handoverLiveTimeout + handoverSwitchTimeout + 30*time.Second
}

// Handler is POST /envoy/handover on the loopback endpoint (only root or
// the agent's user, as /drain): hand over to a new Envoy from
// --envoy-binary now, and answer once it serves or failed.
func (u *Upgrades) Handler() http.Handler {
	return upgrade.Handler(handoverAnswerWithin(),
		func(ctx context.Context) error { return u.replaceEnvoy(ctx, "asked on /envoy/handover", nil) },
		func() string {
			return fmt.Sprintf("Envoy generation %d serves (pid %d); the old one drains", u.Serving().Generation, u.h.Sup.Now().Proc.PID())
		})
}

// relayMove is the relay as a handover moves the control plane's stream.
type relayMove struct{ Feature }

func (r relayMove) Takeable() (string, bool) {
	up, ok := r.FromControlPlane()
	return string(up), ok
}

// moverOf is kit's relay as a handover moves it; nil (none, which a
// handover refuses) in direct mode.
func moverOf(kit *Kit) upgrade.Relay {
	if kit != nil && kit.Relay != nil {
		return relayMove{kit.Relay}
	}
	return nil
}

// swap is how this agent starts a new Envoy for a handover.
func (u *Upgrades) swap(log *zap.Logger) upgrade.Swap[supervise.Process, supervise.Admin] {
	return upgrade.Swap[supervise.Process, supervise.Admin]{Log: log, Find: u.h.FindEnvoy, Start: u.h.Sup.Envoy.Start, Admin: u.h.Sup.Envoy.Admin,
		Want: listenwatch.Names(listenwatch.Expected(u.h.Config)), LiveTimeout: handoverLiveTimeout, SwitchTimeout: handoverSwitchTimeout,
		Grace: supervise.StopGrace, Retiring: &u.retiring}
}

// Handover does one handover on the serve loop: e becomes the new Envoy.
// It answers req with the outcome.
func (u *Upgrades) Handover(ctx context.Context, e *supervise.Serving, req upgrade.Request) {
	req.Answer(u.handover(ctx, e, req))
}

func (u *Upgrades) handover(ctx context.Context, e *supervise.Serving, req upgrade.Request) error {
	kit := u.kit.Load()
	mover := moverOf(kit)
	if kit != nil {
		mover = moverFor(mover, kit.Launch.Bootstrap, req.Bootstrap)
	}
	if mover != nil && req.Bootstrap != nil {
		next := *kit
		next.Launch = kit.Launch.WithBootstrap(req.Bootstrap)
		kit = &next
	}
	var commit func() error
	if req.Bootstrap != nil {
		commit = func() error { return u.keepBootstrap(kit) }
	}
	from := u.Serving()
	log := u.h.Log.With(zap.Int64("generation", from.Next().Generation), zap.Int("old pid", e.Proc.PID()), zap.String("reason", req.Reason))
	started := time.Now()
	var launch *upgrade.Launch
	if kit != nil {
		launch = kit.Launch
	}
	took, err := u.swap(log).Run(ctx, launch, mover, e.Proc.PID(), from, commit)
	switch {
	case errors.Is(err, upgrade.ErrHandoverRefused):
		return err
	case err != nil:
		if req.Bootstrap != nil {
			u.restoreBootstrap(log)
		}
		u.results.Add("failed", 1)
		log.Error("Envoy handover failed; the old Envoy keeps serving", zap.Error(err))
		return fmt.Errorf("Envoy handover failed; the old Envoy (pid %d) keeps serving: %w", e.Proc.PID(), err)
	}
	build := took.Version.Build
	u.hmu.Lock()
	u.held.envoyPath, u.held.envoyVer = took.Path, took.Version
	u.hmu.Unlock()
	oldAdmin, oldProc := e.Admin, e.Proc
	e.Proc, e.Admin = took.Proc, took.Admin
	e.Start = u.RestartFrom(kit, took.Place, build)
	u.Started(took.Place, kit)
	u.launched(launchOf(u.h.Config))
	u.h.Sup.Started(supervise.Current{Admin: took.Admin, Proc: took.Proc, Build: build, Generation: took.Place.Generation})
	u.h.Serves(took.Admin)
	if client, ok := took.Admin.(*envoy.Admin); ok {
		kit.Stats.Store(client)
	}
	u.results.Add("success", 1)
	log.Info("Envoy handover done: the new Envoy serves; the old one stops accepting, drains and exits",
		zap.Int("pid", took.Proc.PID()), zap.String("build", build), zap.Duration("after", time.Since(started).Round(time.Millisecond)))
	u.retire(oldAdmin, oldProc, log)
	u.h.Restate()
	return nil
}

// retire drains and ends the old Envoy as a stop does, in the background.
func (u *Upgrades) retire(admin supervise.ServingAdmin, proc supervise.Process, log *zap.Logger) {
	cfg := u.h.Config
	w := supervise.NewWindow(time.Time{}, cfg.DrainMin, cfg.DrainTime)
	u.retiring.Retire(upgrade.Old{Admin: admin, Proc: proc, Deadline: w.Deadline, Grace: supervise.StopGrace, Skip: u.h.Skip, Log: log,
		Await: func(ctx context.Context, cut <-chan struct{}) string {
			return string(u.h.Sup.AwaitDrain(ctx, admin, proc, w, cut, func() {}))
		}})
}

// RestartFrom is how an undrain restarts the Envoy at place in place, on
// its slot's files.
func (u *Upgrades) RestartFrom(kit *Kit, at upgrade.Place, build string) func() (supervise.Process, error) {
	return func() (supervise.Process, error) {
		path, _, err := u.h.FindEnvoy(context.Background())
		if err != nil {
			return nil, err
		}
		spec, _, err := kit.Launch.SpecFor(at.Slot, path)
		if err != nil {
			return nil, err
		}
		p, err := u.h.Sup.Envoy.Start(spec)
		if err != nil {
			return nil, err
		}
		u.h.Sup.Started(supervise.Current{Admin: u.h.Sup.Now().Admin, Proc: p, Build: build, Generation: at.Generation})
		u.h.Log.Info("started Envoy", zap.Int("pid", p.PID()), zap.Int64("generation", at.Generation), zap.Strings("args", spec.Args))
		return p, nil
	}
}
