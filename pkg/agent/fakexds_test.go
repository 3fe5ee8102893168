package agent

import (
	"context"
	"errors"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// fakeXDS is a relayed xDS feature whose stream says what a test sets.
type fakeXDS struct {
	bootstrap []byte
	admin     envoy.AdminAddress
	stream    xds.StreamState
	withdrawn bool
	direct    bool // Envoy talks to the control plane itself
}

var _ XDSFeature = (*fakeXDS)(nil)

func (f *fakeXDS) Bootstrap() []byte                    { return f.bootstrap }
func (f *fakeXDS) Admin() envoy.AdminAddress            { return f.admin }
func (f *fakeXDS) Resumption() *xds.Resumption          { return &xds.Resumption{} }
func (f *fakeXDS) Relayed() bool                        { return !f.direct }
func (f *fakeXDS) Stream() xds.StreamState              { return f.stream }
func (f *fakeXDS) Live() (xds.Upstream, xds.CacheState) { return f.stream.Upstream, f.stream.Cached }
func (f *fakeXDS) FromControlPlane() (xds.UpstreamState, bool) {
	return f.stream.Upstream.State, f.stream.Upstream.State == xds.Connected && !f.stream.Cached.InUse
}
func (f *fakeXDS) WithdrawEgress(<-chan struct{}, func()) bool { return false }
func (f *fakeXDS) Rejoin()                                     {}
func (f *fakeXDS) ZoneListenersPresent([]string)               {}
func (f *fakeXDS) NoListenersSent() bool                       { return false }
func (f *fakeXDS) Withdrawn() bool                             { return f.withdrawn }
func (f *fakeXDS) BeginHandover(int)                           {}
func (f *fakeXDS) CompleteHandover(context.Context) error      { return errors.New("fake: no handover") }
func (f *fakeXDS) EndHandover()                                {}
func (f *fakeXDS) Close()                                      {}
