package upgrade

import (
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// Across a kuma-cp upgrade the control plane's bootstrap may ask for
// another ADS protocol than the running Envoy was started with: kuma-cp
// 2.14 gives state of the world, 3.0 delta only. Envoy cannot change its
// protocol, so a new Envoy is started from the new bootstrap and takes over
// (an Envoy handover). Whatever else the upgrade changed in the bootstrap
// comes with it.

// ProtocolChange is the decision for a running Envoy of one ADS protocol
// and the bootstrap the control plane gives now.
type ProtocolChange struct {
	// Change: hand over to an Envoy started from the new bootstrap.
	Change bool
	// Words say what happened and what zoneproxy does about it.
	Words string
}

// DecideProtocol decides for an Envoy speaking runningDelta when the control
// plane's bootstrap asks for offeredDelta; unserved: the control plane
// refused or left unanswered the running protocol.
func DecideProtocol(runningDelta, offeredDelta, unserved bool) ProtocolChange {
	if runningDelta == offeredDelta {
		return ProtocolChange{}
	}
	release := "Kuma " + version.ForADS(offeredDelta).Line()
	words := "kuma-cp's bootstrap asks for " + protocolName(offeredDelta) + " ADS (" + release + ") where Envoy speaks " + protocolName(runningDelta)
	if unserved {
		words = "kuma-cp no longer serves " + protocolName(runningDelta) + " ADS (" + release + ")"
	}
	return ProtocolChange{Change: true, Words: words}
}

// Handing, Done and Failed are the words while the new Envoy takes over,
// once it did, and when it could not.
func (p ProtocolChange) Handing() string {
	return p.Words + "; handing over to an Envoy started from its new bootstrap"
}

func (p ProtocolChange) Done() string {
	return p.Words + "; an Envoy started from its new bootstrap took over, without dropping a connection"
}

func (p ProtocolChange) Failed(err error) string {
	return p.Words + "; the handover to an Envoy started from its new bootstrap failed (the old Envoy serves on, zoneproxy tries again): " + err.Error()
}

func protocolName(delta bool) string {
	if delta {
		return "delta"
	}
	return "state-of-the-world"
}
