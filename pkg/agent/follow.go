package agent

import (
	"context"
	"sync/atomic"

	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
)

// The control plane's ADS protocol may change under a running Envoy across
// a kuma-cp upgrade (2.14 state of the world, 3.0 delta only): the xDS
// feature says when to check, and the upgrades check and hand over
// (inplace.Upgrades.FollowControlPlane).

// protocolFollow holds the context the checks run in: runEnvoy's.
type protocolFollow struct {
	ctx atomic.Pointer[context.Context]
}

// checkProtocol is xds.Hooks.CheckProtocol: it must not block.
func (a *Agent) checkProtocol(why string, unserved bool) {
	ctx := a.follow.ctx.Load()
	if ctx == nil || (*ctx).Err() != nil {
		return
	}
	go a.up.FollowControlPlane(*ctx, why, unserved)
}

// protocolChangeStatus adds the last change of ADS protocol to st: while
// it is under way, it is what the control plane makes of the proxy.
func (a *Agent) protocolChangeStatus(st *Status) {
	pc := a.up.ProtocolChange()
	if pc == nil {
		return
	}
	st.ProtocolChange = pc
	if pc.State == inplace.HandingOver {
		st.ControlPlane.Says = pc.Says
	}
}
