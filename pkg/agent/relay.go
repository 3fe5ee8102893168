package agent

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// XDSFeature is Envoy's configuration stream as the agent drives it
// through pkg/xds, its only door to xDS: *xds.Feature, or a fake in the
// agent's tests (Options.StartXDS).
type XDSFeature interface {
	Bootstrap() []byte
	Admin() envoy.AdminAddress
	Resumption() *xds.Resumption // nil in direct mode
	Relayed() bool
	Stream() xds.StreamState
	Live() (xds.Upstream, xds.CacheState)
	FromControlPlane() (xds.UpstreamState, bool)
	WithdrawEgress(skip <-chan struct{}, withdrawn func()) bool
	Rejoin()
	Withdrawn() bool
	ZoneListenersPresent(names []string)
	NoListenersSent() bool
	BeginHandover(serving int)
	CompleteHandover(ctx context.Context) error
	EndHandover()
	Close()
}

// StartXDS starts Envoy's configuration stream (xds.Start).
type StartXDS func(xds.Options) (XDSFeature, error)

func startRealXDS(o xds.Options) (XDSFeature, error) {
	f, err := xds.Start(o)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// openCache opens the last-known-good cache of this identity in the state
// dir the agent holds (xds.OpenCache); nil when there is none.
func (a *Agent) openCache(sd *stateDir) (*xds.Cache, error) {
	if sd == nil {
		return nil, nil
	}
	c, err := xds.OpenCache(sd.dir, a.cfg, a.log)
	if c != nil {
		a.opts.Metrics.WatchCacheCertificateExpiry(c.EarliestNotAfter)
	}
	return c, err
}

// usableCache is the cached configuration the agent may start Envoy on, nil
// when there is none it may serve (logged once per reason).
func usableCache(c *xds.Cache, wd *workDir, log *zap.Logger, said *string) *xds.Cached {
	if c == nil {
		return nil
	}
	snap, err := c.Servable(wd.file(xds.SocketName))
	if err != nil {
		if err.Error() != *said {
			*said = err.Error()
			log.Info("no cached configuration to serve while the control plane is unreachable", zap.String("reason", *said))
		}
		return nil
	}
	return snap
}

// startXDS starts Envoy's configuration stream on the control plane's
// bootstrap doc or the cached configuration: through the relay, or
// directly; a.xds holds it.
func (a *Agent) startXDS(wd *workDir, doc []byte, cached *xds.Cached, cache *xds.Cache, prep *launchPrep) (XDSFeature, error) {
	f, err := a.opts.StartXDS(xds.Options{
		Relay:        a.up.Relayed(),
		Resume:       a.up.Resumption(), // an adopted Envoy's relay
		Bootstrap:    doc,
		Cached:       cached,
		SocketPath:   wd.file(xds.SocketName),
		Listener:     prep.relayListener, // opened while the bootstrap was fetched
		ControlPlane: xds.ControlPlane{URL: a.cfg.CPAddress, CAPEM: a.caPEM},
		Token:        a.token.Read,
		// kuma-cp shows the agent that runs now, also after a reload.
		AgentMetadata:  bootstrap.SetAgentBuild,
		EgressListener: xds.EgressListener(a.cfg),
		Cache:          cache,
		Backoff:        backoff.Backoff{Initial: a.cfg.RetryInitial, Max: a.cfg.RetryMax},
		Log:            a.log.Named("xds"),
		Notes:          a.log,
		Register:       a.opts.Metrics.Register,
		Hooks: xds.Hooks{
			Waiting:        waitingFor(a.tracker),
			ServingChanged: a.refreshServing,
			// The relay logs and counts rejections; a zone listener Envoy
			// could not bind is the listener check's to explain and retry.
			Rejected:      func(r xds.Rejection) { a.listeners.Rejected(r.TypeURL, r.Message, r.FromCache) },
			CheckProtocol: a.follow.check,
		},
	})
	if err != nil {
		return nil, err
	}
	a.xds.set(f)
	return f, nil
}

// xdsSlot holds Envoy's configuration stream once Envoy starts. /status
// may ask before it is set.
type xdsSlot struct {
	mu sync.Mutex
	f  XDSFeature
}

func (s *xdsSlot) set(f XDSFeature) {
	s.mu.Lock()
	s.f = f
	s.mu.Unlock()
}

// get is the relayed feature, nil if none (also in direct mode).
func (s *xdsSlot) get() XDSFeature {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil || !s.f.Relayed() {
		return nil
	}
	return s.f
}

// feature is the stream in either mode, as a reload hands it over; nil
// before it starts.
func (s *xdsSlot) feature() inplace.Feature {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	return s.f
}

// stream is what the relay's events said; zero if none.
func (s *xdsSlot) stream() xds.StreamState {
	if f := s.get(); f != nil {
		return f.Stream()
	}
	return xds.StreamState{}
}

// servingDetail is the READY detail: plain, or saying the configuration is
// the cached one, since when and why.
func (s *xdsSlot) servingDetail() string { return s.stream().ServingDetail() }

// zoneListenersPresent tells the feature which zone listeners Envoy has.
func (s *xdsSlot) zoneListenersPresent(names []string) {
	if f := s.get(); f != nil {
		f.ZoneListenersPresent(names)
	}
}

// noListenersSent: kuma-cp has the stream yet sent no listeners at all.
func (s *xdsSlot) noListenersSent() bool {
	f := s.get()
	return f != nil && f.NoListenersSent()
}

// lastRefusal is the control plane's last refusal, "" if none.
func (s *xdsSlot) lastRefusal() string { return s.stream().Refusal }

// newEnvoyConfigured says whether an Envoy started now gets its
// configuration at once (xds.StreamState.NewEnvoyConfigured). In direct
// mode Envoy asks the control plane itself.
func (s *xdsSlot) newEnvoyConfigured() bool {
	f := s.get()
	return f == nil || f.Stream().NewEnvoyConfigured()
}

// waitingFor says why Envoy waits for the control plane, while it starts; a
// later phase is left alone.
func waitingFor(tracker *state.Tracker) func(why string) {
	return func(why string) {
		if p := tracker.Current().Phase; p == state.EnvoyStarting || p == state.WaitingForControlPlane {
			tracker.Set(state.WaitingForControlPlane, why)
		}
	}
}

// refreshServing restates READY when what it says changed (the cached
// configuration in use or not); any other phase is left alone.
func (a *Agent) refreshServing() {
	a.tracker.Restate(state.Ready, a.up.GenerationWords(a.xds.servingDetail()))
}
