package xds

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

// The relay's vocabulary, as the agent sees it through this package.
type (
	Upstream      = relay.Upstream
	UpstreamState = relay.UpstreamState
	CacheState    = relay.CacheState
	Rejection     = relay.Rejection
)

// The states of Upstream.State (relay.UpstreamState).
const (
	Connected    = relay.Connected
	Held         = relay.Held
	AnotherProxy = relay.AnotherProxy
	Unreachable  = relay.Unreachable
	Refused      = relay.Refused
	Withdrawn    = relay.Withdrawn
)

// Hooks are what the agent does with what happens on the stream. They are
// called from the relay's goroutines, so they must not block; any may be
// nil.
type Hooks struct {
	// Waiting: Envoy waits for the control plane, for why. The agent says
	// so while Envoy starts; later phases are left alone.
	Waiting func(why string)
	// ServingChanged: what StreamState.ServingDetail says may have changed.
	ServingChanged func()
	// Rejected: Envoy NACKed a configuration (the relay logs and counts it).
	Rejected func(Rejection)
	// CheckProtocol: the control plane's bootstrap may ask for another ADS
	// protocol than Envoy speaks; unserved: it answers but refuses, or
	// leaves unanswered, Envoy's protocol (why says which), else it came
	// back from an outage (unserved.go).
	CheckProtocol func(why string, unserved bool)
}

// StreamState is what the relay's events said of the stream.
type StreamState struct {
	Upstream Upstream
	Cached   CacheState
	// Refusal is the control plane's last refusal while Envoy is not
	// served from it, "" if none.
	Refusal string
	// Egress says why the zone egress is not in kuma-cp's egress set yet
	// (HeldBackWords, RegisteringWords); "" when it is, or the role has none.
	Egress string
}

// ServingDetail is the READY detail: plain, or saying the configuration is
// the cached one, since when and why, and where the egress registration is.
func (s StreamState) ServingDetail() string {
	switch {
	case s.Egress == "":
		return s.servingDetail()
	case s.Egress == RegisteringWords && s.Cached.InUse:
		// The cache stands in only while kuma-cp takes the new
		// registration: no outage, no restart.
		return "Envoy ready, on the configuration kuma-cp sent it; the zone egress is " + s.Egress
	}
	return s.servingDetail() + "; the zone egress is " + s.Egress
}

func (s StreamState) servingDetail() string {
	if !s.Cached.InUse {
		return "Envoy ready"
	}
	why := "the control plane is unreachable"
	switch {
	case s.Upstream.State == AnotherProxy:
		why = AnotherProxyWords
	case s.Upstream.State == Unserved:
		why = UnservedWords
	case s.Upstream.State == Unanswered:
		why = UnansweredWords
	case s.Cached.Held:
		why = HeldWords
	case s.Refusal != "":
		why = "the control plane refuses the configuration stream: " + s.Refusal
	}
	return fmt.Sprintf("serving the cached configuration of %s since %s: %s",
		s.Cached.WrittenAt.UTC().Format(time.RFC3339), s.Cached.Since.UTC().Format(time.RFC3339), why)
}

// NewEnvoyConfigured says whether an Envoy started now gets its
// configuration at once: the control plane has this proxy's stream, or the
// relay serves the cache (a new stream is served it too until kuma-cp
// takes it). Otherwise a restart would leave Envoy with nothing until the
// control plane answers.
func (s StreamState) NewEnvoyConfigured() bool {
	return s.Upstream.State == Connected || s.Cached.InUse
}

// HeldWords says what kuma-cp does while it holds the stream of this
// proxy's previous run.
const HeldWords = "kuma-cp still holds the stream of this proxy's previous run (expected after a restart) and refuses new ones until its deregistration delay (10 s by default) is over; it keeps the previous Dataplane until then, deletes it, and registers it anew from this proxy's next stream, which the agent opens within a few hundred milliseconds"

// AnotherProxyWords says why refusals that go on look like a duplicate.
var AnotherProxyWords = "kuma-cp has refused this proxy's streams for longer than any deregistration delay, saying another stream of this name is active: another zone proxy runs with this " + config.KeyName.Flag() + " (check the other hosts), or kuma-cp is stuck deregistering it"

// ControlPlaneWords says in plain words what kuma-cp makes of the proxy;
// relayed is false when Envoy talks to the control plane itself.
func ControlPlaneWords(s UpstreamState, relayed bool, refusal string) string {
	switch s {
	case Connected:
		return "kuma-cp has this proxy's stream: its Dataplane is registered, and configuration flows"
	case Held:
		return HeldWords
	case AnotherProxy:
		return AnotherProxyWords
	case Unreachable:
		return "the control plane does not answer; it keeps the Dataplane it has until it sees the stream close, then deletes it after its deregistration delay"
	case Refused:
		if refusal == "" {
			return "the control plane refused this proxy's stream"
		}
		return "the control plane refused this proxy's stream: " + refusal
	case Withdrawn:
		return WithdrawnWords
	case Unserved:
		return UnservedWords
	case Unanswered:
		return UnansweredWords
	}
	if !relayed {
		return "unknown: Envoy talks to the control plane directly (" + config.KeyXDSRelay.Flag() + "=false)"
	}
	return "no stream yet"
}

// watch turns the relay's events into StreamState and the agent's hooks.
type watch struct {
	hooks Hooks
	log   *zap.Logger
	held  *heldBack // nil: the egress, if any, registers Ready at once

	mu sync.Mutex
	st StreamState
}

func (w *watch) events() relay.Events {
	return relay.Events{
		StreamError:  w.streamError,
		CachedConfig: w.cachedConfig,
		Upstream:     w.upstreamChanged,
		Rejected:     w.hooks.Rejected,
		Unanswered:   w.unanswered,
	}
}

func (w *watch) state() StreamState {
	w.mu.Lock()
	st := w.st
	w.mu.Unlock()
	st.Egress = w.held.words()
	return st
}

func (w *watch) streamError(e relay.StreamError) {
	if e.Held {
		// Without a cache to serve, Envoy waits for kuma-cp to let go.
		why := "no cached configuration to serve meanwhile: " + HeldWords
		if w.state().Upstream.State == AnotherProxy {
			why = AnotherProxyWords
		}
		w.waiting(why)
		return
	}
	if e.Unserved {
		w.unserved()
		return
	}
	// Local and unreachable ones the relay logs and retries (the cache may
	// be serving); retried refusals it has logged in the control plane's
	// words.
	if e.Local || e.Unreachable || e.Retrying {
		return
	}
	w.mu.Lock()
	w.st.Refusal = e.Message
	w.mu.Unlock()
	// Before Envoy serves, the control plane's own words are the reason;
	// while it serves the cached configuration, they say why it still does.
	w.waiting("the control plane refused Envoy's configuration stream: " + e.Message)
	w.servingChanged()
}

func (w *watch) cachedConfig(c CacheState) {
	w.mu.Lock()
	w.st.Cached = c
	if !c.InUse {
		w.st.Refusal = ""
	}
	up := w.st.Upstream.State
	w.mu.Unlock()
	switch {
	case c.InUse && c.Held: // expected after a restart: the relay said so
	case c.InUse && (up == Unserved || up == Unanswered): // it answers: the relay said what
	case c.InUse:
		w.log.Warn("the control plane is unreachable: Envoy serves the last-known-good configuration",
			zap.Time("configuration from", c.WrittenAt), zap.Time("since", c.Since))
	default:
		w.log.Info("the control plane is back: Envoy's configuration comes from it again")
		// Another release may have come back; even a cache served while
		// kuma-cp held a reregistration may have outlasted an outage.
		w.back()
	}
	w.servingChanged()
}

func (w *watch) upstreamChanged(u Upstream) {
	w.mu.Lock()
	w.st.Upstream = u
	w.mu.Unlock()
	if w.held.upstream(u.State) {
		w.log.Info("kuma-cp registered the zone egress Ready: the zone's sidecars are sent to it once they hear of it (within a few seconds)")
	}
	w.servingChanged()
}

func (w *watch) waiting(why string) {
	if w.hooks.Waiting != nil {
		w.hooks.Waiting(why)
	}
}

func (w *watch) servingChanged() {
	if w.hooks.ServingChanged != nil {
		w.hooks.ServingChanged()
	}
}
