package agent

import "github.com/zoneproxy/zoneproxy/pkg/xds"

// Before a zone egress stops or drains, it leaves kuma-cp's egress set, so
// that no sidecar is sent a new connection once its listeners close
// (xds.Feature.WithdrawEgress says how).

// WithdrawTime is the most a withdrawal adds to a stop.
const WithdrawTime = xds.WithdrawTime

// withdrawingWords is the TERMINATING or DRAINING detail meanwhile.
var withdrawingWords = xds.WithdrawingWords

// withdrawEgress takes a zone egress out of the egress set and waits until
// the sidecars have heard of it; skip closed (a second stop signal, or a
// stop during a maintenance drain) cuts it short.
// It reports whether the proxy was withdrawn.
func (a *Agent) withdrawEgress(skip <-chan struct{}) bool {
	x := a.xds.get()
	if x == nil || !a.cfg.Role.HasEgress() {
		return false
	}
	return x.WithdrawEgress(skip, func() { a.tracker.Restate(a.tracker.Current().Phase, xds.WithdrawnWords) })
}

// rejoin ends a withdrawal: the next Envoy registers Ready again.
func (a *Agent) rejoin() {
	if x := a.xds.get(); x != nil {
		x.Rejoin()
	}
}
