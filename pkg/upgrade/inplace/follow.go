package inplace

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// Following the control plane across its upgrade: kuma-cp 3.0 serves delta
// ADS only, and an Envoy bootstrapped by 2.14 speaks state of the world.
// When the relay says the control plane answers but not Envoy's protocol
// (refused or unanswered), or the control plane comes back from an
// outage (a rollback to 2.14 serves delta too, but would count a delta
// proxy's kumaDp version as another major's), the agent asks the control
// plane for the bootstrap a start would get; if its ADS protocol differs,
// an Envoy started from it takes over (the Envoy handover, which drops no
// connection). Envoy serves its cached configuration meanwhile.

// followEvery spaces the checks prompted by refusals: the relay retries a
// refused stream every few seconds, and each check is a bootstrap request.
// A control plane back from an outage is checked at once: it says so once.
var followEvery = 10 * time.Second

// The states of ProtocolChangeStatus.
const (
	HandingOver = "handing-over"
	Done        = "done"
	Failed      = "failed"
)

// ProtocolChangeStatus is the last change of ADS protocol, for /status.
type ProtocolChangeStatus struct {
	// State is HandingOver, Done or Failed.
	State string    `json:"state"`
	Says  string    `json:"says"`
	Since time.Time `json:"since"`
}

// follow is the state of FollowControlPlane.
type follow struct {
	mu      sync.Mutex
	running bool
	last    time.Time // the last check prompted by a refusal
	status  *ProtocolChangeStatus
	changes *prometheus.CounterVec
}

func (u *Upgrades) registerProtocolChanges() {
	u.follow.changes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zoneproxy_xds_protocol_changes_total",
		Help: "Envoy handovers because the control plane's bootstrap asks for another ADS protocol than Envoy speaks (a kuma-cp upgrade between 2.14 and 3.0), by the new protocol (delta, state-of-the-world) and result (success, failed).",
	}, []string{"to", "result"})
	u.h.Metrics.Register(u.follow.changes)
}

// ProtocolChange is the last change of ADS protocol, nil if none.
func (u *Upgrades) ProtocolChange() *ProtocolChangeStatus {
	u.follow.mu.Lock()
	defer u.follow.mu.Unlock()
	if u.follow.status == nil {
		return nil
	}
	st := *u.follow.status
	return &st
}

// FollowControlPlane checks the control plane's bootstrap and hands over
// to an Envoy started from it if it asks for another ADS protocol; why is
// what prompted it, unserved when the control plane refused or left
// unanswered Envoy's protocol. One check at a time; those prompted by
// refusals one per followEvery.
func (u *Upgrades) FollowControlPlane(ctx context.Context, why string, unserved bool) {
	if !u.h.Serving() || u.h.Drained() || !u.startFollowing(unserved) {
		return
	}
	defer u.endFollowing()
	log := u.h.Log.With(zap.String("prompted by", why))
	doc, change, delta, ok := u.offeredProtocol(ctx, log, unserved)
	if !ok || !change.Change {
		return
	}
	u.setProtocolStatus(HandingOver, change.Handing())
	log.Warn(change.Handing())
	to := xds.ProtocolName(delta)
	if err := u.replaceEnvoy(ctx, change.Words, doc); err != nil {
		u.follow.changes.WithLabelValues(to, "failed").Inc()
		u.setProtocolStatus(Failed, change.Failed(err))
		log.Error(change.Failed(err))
		return
	}
	u.follow.changes.WithLabelValues(to, "success").Inc()
	u.setProtocolStatus(Done, change.Done())
	log.Info(change.Done())
}

// offeredProtocol asks the control plane for the bootstrap a start would
// get and decides; doc is it, rewritten for the relay; delta its protocol.
func (u *Upgrades) offeredProtocol(ctx context.Context, log *zap.Logger, unserved bool) (doc []byte, change upgrade.ProtocolChange, delta, ok bool) {
	kit, feature := u.kit.Load(), u.h.Feature()
	u.hmu.Lock()
	ev := u.held.envoyVer
	u.hmu.Unlock()
	cannot := func(err error) ([]byte, upgrade.ProtocolChange, bool, bool) {
		log.Warn("cannot compare the control plane's bootstrap with the running Envoy's ADS protocol; Envoy serves on, and zoneproxy asks again", zap.Error(err))
		return nil, change, false, false
	}
	doc, up, asked, err := u.offeredBootstrap(ctx, kit, feature, ev)
	switch {
	case !asked || kit.Relay == nil:
		return nil, change, false, false
	case err != nil:
		return cannot(err)
	}
	running, err := xds.ADSIsDelta(kit.Launch.Bootstrap)
	if err != nil {
		return cannot(err)
	}
	if delta, err = xds.ADSIsDelta(doc); err != nil {
		return cannot(err)
	}
	change = upgrade.DecideProtocol(running, delta, unserved)
	if !change.Change {
		log.Info("the control plane's bootstrap asks for the ADS protocol Envoy speaks; Envoy keeps its bootstrap", zap.String("protocol", xds.ProtocolName(running)))
		return nil, change, delta, true
	}
	if !reflect.DeepEqual(up, feature.Resumption().Upstream) {
		log.Warn(change.Words + "; its bootstrap also changed where Envoy's xDS goes, which the relay cannot follow: restart the agent to apply it")
		return nil, upgrade.ProtocolChange{}, delta, false
	}
	return doc, change, delta, true
}

func (u *Upgrades) startFollowing(unserved bool) bool {
	u.follow.mu.Lock()
	defer u.follow.mu.Unlock()
	now := time.Now()
	if u.follow.running || unserved && now.Sub(u.follow.last) < followEvery {
		return false
	}
	u.follow.running = true
	if unserved {
		u.follow.last = now
	}
	return true
}

func (u *Upgrades) endFollowing() {
	u.follow.mu.Lock()
	u.follow.running = false
	u.follow.mu.Unlock()
}

func (u *Upgrades) setProtocolStatus(state, says string) {
	u.follow.mu.Lock()
	u.follow.status = &ProtocolChangeStatus{State: state, Says: says, Since: time.Now()}
	u.follow.mu.Unlock()
}

// anotherProtocol is the relay as a handover to an Envoy of another ADS
// protocol moves it: there is no stream to move, since the control plane
// does not serve the running Envoy's protocol; the new Envoy opens its own.
type anotherProtocol struct{ upgrade.Relay }

func (anotherProtocol) Takeable() (string, bool) { return "another ADS protocol", true }

// moverFor is how a handover to bootstrap next moves the relay: as
// anotherProtocol when next asks for another ADS protocol than running.
func moverFor(mover upgrade.Relay, running, next []byte) upgrade.Relay {
	if mover == nil || next == nil {
		return mover
	}
	was, err1 := xds.ADSIsDelta(running)
	now, err2 := xds.ADSIsDelta(next)
	if err1 != nil || err2 != nil || was == now {
		return mover
	}
	return anotherProtocol{mover}
}
