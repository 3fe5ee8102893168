package relay

import (
	"strings"

	"google.golang.org/grpc/status"
	"math/rand/v2"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
)

// alreadyActive is kuma-cp's refusal of a second stream from one node
// (pkg/xds/server/callbacks/dataplane_callbacks.go).
const alreadyActive = "already an active stream"

// isHeld: err is that refusal.
func isHeld(err error) bool {
	st, _ := status.FromError(err) // its message whatever err is
	return err != nil && strings.Contains(st.Message(), alreadyActive)
}

// kuma-cp removes a node from its active streams only once the
// deregistration of the closed stream has finished: it waits
// KUMA_XDS_DATAPLANE_DEREGISTRATION_DELAY (10 s by default, a setting the
// proxy cannot see), deletes the Dataplane, then lets go. So after a
// restart every stream of this node is refused until a moment the relay
// cannot know, and the refusal itself is the only signal. The relay asks
// again every heldRetryMin to heldRetryMax, drawn at random so that proxies
// restarted together do not ask in step, on one kept connection: a refused
// stream costs kuma-cp its authentication and one map look-up, no TLS
// handshake. The new stream is then accepted within about 200 ms of the
// release, which bounds the time kuma-cp has no Dataplane for the proxy.
// From heldReleaseDue on, when kuma-cp's default delay (10 s) is about to
// end, the relay asks every heldSoonMin to heldSoonMax: kuma-cp's store
// cache (1 s) may hand the zone's sidecars a list without the proxy if it
// fills during that gap, so a shorter gap is a smaller chance of a second
// without this zone egress.
const (
	heldRetryMin   = 100 * time.Millisecond
	heldRetryMax   = 300 * time.Millisecond
	heldReleaseDue = 8 * time.Second
	heldSoonMin    = 25 * time.Millisecond
	heldSoonMax    = 75 * time.Millisecond
)

// heldPatience is far past any deregistration delay an operator sets:
// refusals that go on longer come from another proxy holding this name's
// stream, not from a restart; the relay then asks at its ordinary backoff.
// A variable for tests.
var heldPatience = 30 * time.Second

// heldRetries paces the retries of one run of refusals.
type heldRetries struct {
	since time.Time
	n     int
}

// next is the pause before the next attempt.
func (h *heldRetries) next(b backoff.Backoff, now time.Time) time.Duration {
	if h.since.IsZero() {
		h.since = now
	}
	switch held := now.Sub(h.since); {
	case held < heldReleaseDue:
		return heldRetryMin + rand.N(heldRetryMax-heldRetryMin)
	case held < heldPatience:
		return heldSoonMin + rand.N(heldSoonMax-heldSoonMin)
	}
	h.n++
	return b.Delay(h.n)
}

// heldLong says whether refusals that began at since look like another
// proxy with this name rather than a restart.
func heldLong(since, now time.Time) bool {
	return !since.IsZero() && now.Sub(since) >= heldPatience
}
