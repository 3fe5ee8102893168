package xds

import (
	"errors"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

// The control plane answers but no longer serves the ADS protocol Envoy
// was started with (kuma-cp 3.0 serves delta only; 2.14 bootstrapped
// Envoy for state of the world): the relay says which shape it took, and
// the agent asks the control plane for its bootstrap (pkg/upgrade/inplace).

// The states of Upstream.State for it (relay.Unserved, relay.Unanswered).
const (
	Unserved   = relay.Unserved
	Unanswered = relay.Unanswered
)

// UnservedWords and UnansweredWords say what the control plane makes of
// the proxy in either shape: it answers, so it is never "unreachable".
const (
	UnservedWords   = "kuma-cp answers, but refuses the ADS protocol Envoy was started with as a method it does not know (kuma-cp 3.0 serves delta ADS only); zoneproxy asks it for its bootstrap and hands over to an Envoy started from it"
	UnansweredWords = "kuma-cp accepted this proxy's stream and has not answered it; if it no longer serves the ADS protocol Envoy was started with (kuma-cp 3.0 serves delta ADS only), zoneproxy hands over to an Envoy started from its new bootstrap"
)

// ADSIsDelta says whether bootstrap doc asks for delta ADS (DELTA_GRPC or
// AGGREGATED_DELTA_GRPC) rather than state of the world.
func ADSIsDelta(doc []byte) (bool, error) {
	top, err := bootstrapdoc.Parse(doc)
	if err != nil {
		return false, err
	}
	return adsIsDelta(top)
}

// adsIsDelta is ADSIsDelta of a parsed bootstrap.
func adsIsDelta(top *bootstrapdoc.Object) (bool, error) {
	ads := top.Object("dynamic_resources").Object("ads_config")
	if ads == nil {
		return false, errors.New("the bootstrap has no dynamic_resources.ads_config")
	}
	switch ads.String("api_type") {
	case "DELTA_GRPC", "AGGREGATED_DELTA_GRPC":
		return true, nil
	}
	return false, nil
}

// ProtocolName names an ADS protocol as messages say it.
func ProtocolName(delta bool) string { return relay.ProtocolName(delta) }

// unserved tells the agent the control plane refused Envoy's protocol.
func (w *watch) unserved() {
	w.checkProtocol(UnservedWords, true)
	w.servingChanged()
}

// unanswered tells the agent the control plane accepted Envoy's stream
// and has not answered it.
func (w *watch) unanswered(relay.UnansweredStream) {
	w.checkProtocol(UnansweredWords, true)
	w.servingChanged()
}

// back: the control plane answers again after an outage; it may be
// another release (an upgrade or a rollback).
func (w *watch) back() {
	w.checkProtocol("the control plane is back after an outage", false)
}

func (w *watch) checkProtocol(why string, unserved bool) {
	if w.hooks.CheckProtocol != nil {
		w.hooks.CheckProtocol(why, unserved)
	}
}
