package agent

import (
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// Before a zone egress stops or drains, it leaves kuma-cp's egress set, so
// that no sidecar is sent a new connection once its listeners close
// (xds.Feature.WithdrawEgress says how).

// WithdrawTime is the most a withdrawal adds to a stop.
const WithdrawTime = xds.WithdrawTime

// withdrawingWords is the TERMINATING or DRAINING detail meanwhile.
var withdrawingWords = xds.WithdrawingWords

// withdrawEgress takes a zone egress (egress: the role has one) out of the
// egress set and waits until the sidecars have heard of it; skip closed (a
// second stop signal, or a stop during a maintenance drain) cuts it short.
// It reports whether the proxy was withdrawn.
func (s *xdsSlot) withdrawEgress(egress bool, skip <-chan struct{}, tracker *state.Tracker) bool {
	x := s.get()
	if x == nil || !egress {
		return false
	}
	return x.WithdrawEgress(skip, func() { tracker.Restate(tracker.Current().Phase, xds.WithdrawnWords) })
}

// rejoin ends a withdrawal: the next Envoy registers Ready again.
func (s *xdsSlot) rejoin() {
	if x := s.get(); x != nil {
		x.Rejoin()
	}
}
