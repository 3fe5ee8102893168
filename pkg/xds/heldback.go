package xds

import (
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// A zone egress is held back from kuma-cp's egress set until its Envoy has
// the egress listener: kuma-cp hands sidecars every egress whose Dataplane
// has a Ready ZoneEgress listener, whether or not it sent that egress a
// listener (it sends none while the mesh has no MeshIdentity), and their
// traffic to it would be black-holed. So a start registers the egress
// listener NotReady, and once Envoy has it, the relay registers the
// Dataplane anew with it Ready; kuma-cp accepts that at the end of its
// deregistration delay (10 s by default), the sidecars hear of it within
// the propagation after. A start whose last-known-good configuration holds
// the egress listener registers Ready at once: the listener was proved,
// and a restart must not cost the sidecars their egress.

// listenerTypeURL is the type of Envoy's listeners in the cache.
const listenerTypeURL = "type.googleapis.com/envoy.config.listener.v3.Listener"

// HeldBackWords is what /status and READY say of an egress held back.
const HeldBackWords = "held back from kuma-cp's zone egress set until Envoy has the egress listener (registered with it NotReady, so no sidecar is sent to a proxy that cannot serve it)"

// RegisteringWords is what they say once Envoy has it.
const RegisteringWords = "being registered Ready: Envoy has the egress listener, and kuma-cp takes the new registration once it lets go of the NotReady one's stream (its deregistration delay, 10 s by default)"

// EgressListener is the name of cfg's zone egress listener in Envoy, ""
// for a role without one (Options.EgressListener).
func EgressListener(cfg *config.Config) string {
	for _, l := range cfg.Dataplane().Networking.Listeners {
		if l.Type == dataplane.TypeZoneEgress {
			return l.EnvoyListenerName()
		}
	}
	return ""
}

// heldBack is the egress listener a start has not seen Envoy hold yet.
type heldBack struct {
	listener string
	on       atomic.Bool // registered NotReady
	// stage of the registration once Envoy has the listener.
	stage atomic.Int32
}

// The stages of a held-back egress's registration as Ready.
const (
	notYet      int32 = iota
	registering       // the relay closed the NotReady registration's stream
	awaitingCP        // kuma-cp holds it; the next stream accepted is Ready's
	registered
)

// holdBack is the hold for the egress listener named listener ("" for a
// role without one), nil when the proxy registers Ready at once.
func holdBack(listener string, cached *lkgcache.Snapshot, cache *lkgcache.Cache) *heldBack {
	if listener == "" || cached.Holds(listenerTypeURL, listener) || (cache != nil && cache.Holds(listenerTypeURL, listener)) {
		return nil
	}
	h := &heldBack{listener: listener}
	h.on.Store(true)
	return h
}

// mark sets the egress listener NotReady in md's Dataplane while held.
func (h *heldBack) mark(md *structpb.Struct) {
	if h == nil || !h.on.Load() {
		return
	}
	_ = markMetadataEgressNotReady(md) // a node without the Dataplane is kuma-cp's to refuse
}

// words is the hold's state for /status, "" once released.
func (h *heldBack) words() string {
	switch {
	case h == nil:
		return ""
	case h.on.Load():
		return HeldBackWords
	case h.stage.Load() == registering || h.stage.Load() == awaitingCP:
		return RegisteringWords
	}
	return ""
}

// ZoneListenersPresent tells the feature which zone listeners Envoy has:
// once the egress listener held back is among them, the relay registers
// the Dataplane anew with it Ready.
func (f *Feature) ZoneListenersPresent(names []string) {
	if f == nil || f.held == nil || !slices.Contains(names, f.held.listener) || !f.held.on.CompareAndSwap(true, false) {
		return
	}
	f.held.stage.Store(registering)
	f.notes.Info("Envoy has the egress listener: registering the zone egress Ready in kuma-cp's egress set; kuma-cp accepts it once it lets go of the NotReady registration's stream (its deregistration delay, 10 s by default)",
		zap.String("listener", f.held.listener))
	if !f.relay.Reregister() {
		// No stream to close: the next one the relay opens is Ready's.
		f.held.stage.Store(awaitingCP)
	}
}

// upstream follows the stream's state once the registration as Ready
// began: it says whether kuma-cp has just accepted it.
func (h *heldBack) upstream(s UpstreamState) bool {
	if h == nil {
		return false
	}
	if s != Connected {
		h.stage.CompareAndSwap(registering, awaitingCP)
		return false
	}
	return h.stage.CompareAndSwap(awaitingCP, registered)
}

// NoListenersSent says whether kuma-cp has this proxy's stream yet has
// sent Envoy no listeners at all (Kuma 2.14 to a zone ingress whose zone
// has no MeshService): Envoy then waits in INITIALIZING for good.
func (f *Feature) NoListenersSent() bool {
	if f == nil || f.relay == nil || f.relay.State().Upstream.State != Connected {
		return false
	}
	return slices.Contains(f.relay.Unanswered(), listenerTypeURL)
}

// NoListenersWords says so to the operator, with what Kuma 2.14 waits
// for before it sends a zone proxy of role any listener.
func NoListenersWords(role config.Role) string {
	var why []string
	if role.HasIngress() {
		why = append(why, "a zone ingress none while its zone has no MeshService (create one, or deploy a service in this zone)")
	}
	if role.HasEgress() {
		why = append(why, "a zone egress none while no MeshIdentity selects it (create one)")
	}
	return "kuma-cp has this proxy's stream but has sent Envoy no listeners at all, so Envoy stays INITIALIZING: Kuma 2.14 sends " + strings.Join(why, ", and ")
}
