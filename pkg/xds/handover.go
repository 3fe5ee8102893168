package xds

import "context"

// An Envoy handover moves the control plane's one stream from the serving
// Envoy to a new one beside it; only the relay can, so in direct mode
// these are no-ops and CompleteHandover fails.

// BeginHandover: a new Envoy starts beside the one of pid serving, whose
// stream stays the control plane's until CompleteHandover.
func (f *Feature) BeginHandover(serving int) {
	if f.Relayed() {
		f.relay.BeginHandover(serving)
	}
}

// CompleteHandover moves the control plane's stream to the new Envoy at a
// quiet moment, bounded by ctx.
func (f *Feature) CompleteHandover(ctx context.Context) error {
	if !f.Relayed() {
		return errNotRelayed
	}
	return f.relay.CompleteHandover(ctx)
}

// EndHandover ends BeginHandover, whether or not it completed.
func (f *Feature) EndHandover() {
	if f.Relayed() {
		f.relay.EndHandover()
	}
}

// FromControlPlane is the control plane's stream state now, and whether
// Envoy's configuration comes from it (connected, not from the cache): a
// new Envoy can take the stream over only then.
func (f *Feature) FromControlPlane() (UpstreamState, bool) {
	up, cache := f.Live()
	return up.State, up.State == Connected && !cache.InUse
}
