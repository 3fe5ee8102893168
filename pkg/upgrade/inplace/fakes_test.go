package inplace

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/state"
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
	h := &host{tracker: state.NewTracker(), sup: &supervise.Supervisor{Envoy: e}}
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
