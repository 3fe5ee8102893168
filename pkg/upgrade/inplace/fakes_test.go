package inplace

import (
	"context"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// host is the agent as the upgrades see it, its state set by a test.
type host struct {
	*Upgrades
	tracker          *state.Tracker
	sup              *supervise.Supervisor
	serving, drained atomic.Bool
	fmu              sync.Mutex
	feature          Feature
	served           []supervise.Admin
	restated         int
}

func newHost(cfg *config.Config, e supervise.Envoy) *host {
	h := &host{tracker: state.NewTracker(), sup: &supervise.Supervisor{Envoy: e, Log: zap.NewNop()}}
	h.Upgrades = New(Host{Config: cfg, Tracker: h.tracker, Sup: h.sup, Skip: make(chan struct{}),
		Serving: h.serving.Load, Drained: h.drained.Load,
		FindEnvoy: func(context.Context) (string, envoy.Version, error) {
			return "/new/envoy", envoy.Version{Build: "new-build"}, nil
		},
		Feature: func() Feature { h.fmu.Lock(); defer h.fmu.Unlock(); return h.feature },
		Serves:  func(a supervise.Admin) { h.fmu.Lock(); h.served = append(h.served, a); h.fmu.Unlock() },
		Restate: func() { h.fmu.Lock(); h.restated++; h.fmu.Unlock() }})
	return h
}

func newFakeProc() *supervisetest.Proc { return supervisetest.NewProc() }

// fakeEnvoy starts fake Envoys whose admin API says LIVE with every zone
// listener, unless told otherwise.
type fakeEnvoy struct {
	mu        sync.Mutex
	exits     bool // a new Envoy exits at once
	build     string
	listeners []string
	started   []*supervisetest.Proc
	specs     []envoy.Spec
}

func (f *fakeEnvoy) Find(context.Context, string, string) (string, envoy.FoundVersion, error) {
	return "/new/envoy", envoy.FoundVersion{Version: envoy.Version{Build: f.build}}, nil
}

func (f *fakeEnvoy) Start(spec envoy.Spec) (supervise.Process, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := newFakeProc()
	if f.exits {
		p.Exit()
	}
	f.started, f.specs = append(f.started, p), append(f.specs, spec)
	return p, nil
}

func (f *fakeEnvoy) Admin(envoy.AdminAddress) supervise.Admin { return newFakeAdmin(f.listeners...) }

// fakeAdmin is a drained-at-once admin API with zone listeners.
type fakeAdmin struct {
	*supervisetest.Admin
	listeners []string
}

func newFakeAdmin(listeners ...string) *fakeAdmin {
	return &fakeAdmin{Admin: &supervisetest.Admin{Counts: func(int) (int, error) { return 0, nil }}, listeners: listeners}
}

func (a *fakeAdmin) Listeners(context.Context) ([]envoy.Listener, error) {
	var out []envoy.Listener
	for _, n := range a.listeners {
		out = append(out, envoy.Listener{Name: n})
	}
	return out, nil
}
func (a *fakeAdmin) SetLogLevel(context.Context, string, string) error { return nil }
func (a *fakeAdmin) Build(context.Context) (string, error)             { return "", nil }
func (a *fakeAdmin) PrometheusStats(context.Context) (string, error)   { return "", nil }
func (a *fakeAdmin) Close()                                            {}

// fakeRelay is the relay with the control plane's stream in state.
type fakeRelay struct {
	state    xds.UpstreamState
	moveErr  error
	resume   *xds.Resumption
	begun    atomic.Int32
	finished atomic.Int32
}

func (r *fakeRelay) Relayed() bool               { return true }
func (r *fakeRelay) Resumption() *xds.Resumption { return r.resume }
func (r *fakeRelay) FromControlPlane() (xds.UpstreamState, bool) {
	return r.state, r.state == xds.Connected
}
func (r *fakeRelay) BeginHandover(int)                      { r.begun.Add(1) }
func (r *fakeRelay) CompleteHandover(context.Context) error { return r.moveErr }
func (r *fakeRelay) EndHandover()                           { r.finished.Add(1) }
