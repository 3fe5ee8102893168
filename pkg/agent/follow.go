package agent

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
)

// The control plane's ADS protocol may change under a running Envoy across
// a kuma-cp upgrade (2.14 state of the world, 3.0 delta only): the xDS
// feature says when to check, and the upgrades check and hand over
// (inplace.Upgrades.FollowControlPlane).

// protocolFollow holds the context the checks run in (runEnvoy's) and
// the upgrades that check and hand over.
type protocolFollow struct {
	ctx atomic.Pointer[context.Context]
	up  *inplace.Upgrades
}

// check is xds.Hooks.CheckProtocol: it must not block.
func (f *protocolFollow) check(why string, unserved bool) {
	ctx := f.ctx.Load()
	if ctx == nil || (*ctx).Err() != nil {
		return
	}
	go func() {
		if !backoff.Sleep(*ctx, followDelay(unserved, randDuration)) {
			return
		}
		f.up.FollowControlPlane(*ctx, why, unserved)
	}()
}

// afterOutageSpread spreads the bootstrap request that checks a control
// plane back from an outage: every proxy of the zone makes it then, on top
// of its new stream, and a rollback waits a little longer for nothing.
// A refusal of Envoy's protocol is checked at once: Envoy gets no live
// configuration until it is.
const afterOutageSpread = 3 * time.Second

// followDelay is how long the check waits; draw picks in [0, n).
func followDelay(unserved bool, draw func(n time.Duration) time.Duration) time.Duration {
	if unserved {
		return 0
	}
	return draw(afterOutageSpread)
}

func randDuration(n time.Duration) time.Duration { return rand.N(n) }

// status adds the last change of ADS protocol to st: while it is under
// way, it is what the control plane makes of the proxy.
func (f *protocolFollow) status(st *Status) {
	pc := f.up.ProtocolChange()
	if pc == nil {
		return
	}
	st.ProtocolChange = pc
	if pc.State == inplace.HandingOver {
		st.ControlPlane.Says = pc.Says
	}
}
