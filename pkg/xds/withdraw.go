package xds

import (
	"context"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
)

// Before a zone egress stops or drains, it leaves kuma-cp's egress set, so
// that no sidecar is sent a new connection once its listeners close.
// kuma-cp reads a Dataplane only from the node metadata of an accepted
// stream and hands a zone egress out while its ZoneEgress listener is Ready
// (pkg/xds/context/mesh_context_builder.go resolveZoneEgresses), whether
// or not the proxy is online. So the relay closes the stream and registers
// the Dataplane anew with that listener NotReady: kuma-cp accepts the new
// stream once it has deleted the old Dataplane, at the end of its
// deregistration delay; the sidecars learn of it within egressPropagation.
const (
	// withdrawMax bounds the wait for kuma-cp to let go of the stream: its
	// default deregistration delay (10 s) and cache expiration (1 s),
	// with a margin.
	withdrawMax = 15 * time.Second
	// WithdrawTime is the most a withdrawal adds to a stop.
	WithdrawTime = withdrawMax + defaultEgressPropagation
	// defaultEgressPropagation is how long the zone's sidecars take to
	// drop the egress once kuma-cp has: its store cache (1 s) and the
	// refresh of each proxy's configuration (1 s), with a margin.
	defaultEgressPropagation = 3 * time.Second
)

// nodeResourceKey is where kuma-cp puts the Dataplane in Envoy's node
// metadata (core_xds.FieldDataplaneDataplaneResource).
const nodeResourceKey = "dataplane.resource"

// WithdrawnWords says what kuma-cp makes of a withdrawn egress.
const WithdrawnWords = "withdrawn from kuma-cp's zone egress set: its Dataplane is registered with the egress listener NotReady, so the zone's sidecars send it no new connection"

// WithdrawingWords is the TERMINATING or DRAINING detail meanwhile.
func WithdrawingWords(then string) string {
	return "withdrawing from kuma-cp's zone egress set before " + then + " (kuma-cp lets go of the proxy's stream at the end of its deregistration delay, 10 s by default)"
}

// WithdrawEgress takes a zone egress out of kuma-cp's egress set and waits
// until the sidecars have heard of it; skip closed (a second stop signal,
// or a stop during a maintenance drain) cuts it short. withdrawn, if set,
// is called once kuma-cp has let go. It reports whether the proxy was
// withdrawn: never in direct mode, where no stream is the agent's.
func (f *Feature) WithdrawEgress(skip <-chan struct{}, withdrawn func()) bool {
	if f == nil || f.relay == nil {
		return false
	}
	start := time.Now()
	f.notes.Info("withdrawing the zone egress from kuma-cp's egress set before its listeners close: its stream is closed and the Dataplane registered anew with the egress listener NotReady, which kuma-cp accepts once its deregistration delay is over",
		zap.Duration("at most", WithdrawTime))
	ctx, cancel := context.WithTimeout(context.Background(), withdrawMax)
	defer cancel()
	go func() {
		select {
		case <-skip:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := f.relay.Withdraw(ctx, markEgressNotReady); err != nil {
		f.notes.Warn("cannot withdraw the zone egress from kuma-cp's egress set; sidecars may still send it connections while it drains",
			zap.Error(err), zap.Duration("after", time.Since(start).Round(time.Millisecond)))
		return false
	}
	f.notes.Info("kuma-cp took the zone egress out of its egress set; waiting for the zone's sidecars to hear of it",
		zap.Duration("after", time.Since(start).Round(time.Millisecond)), zap.Duration("propagation", f.egressPropagation))
	if withdrawn != nil {
		withdrawn()
	}
	t := time.NewTimer(f.egressPropagation)
	defer t.Stop()
	select {
	case <-t.C:
	case <-skip:
	}
	return true
}

// markEgressNotReady sets the node's Dataplane's egress listeners NotReady.
func markEgressNotReady(node *corev3.Node) error {
	return markMetadataEgressNotReady(node.GetMetadata())
}

// markMetadataEgressNotReady sets the egress listeners NotReady in the
// Dataplane a node's metadata md carries.
func markMetadataEgressNotReady(md *structpb.Struct) error {
	fields := md.GetFields()
	res, err := dataplane.WithEgressNotReady(fields[nodeResourceKey].GetStringValue())
	if err != nil {
		return err
	}
	fields[nodeResourceKey] = structpb.NewStringValue(res)
	return nil
}

// Rejoin ends a withdrawal: the next Envoy registers Ready again. It is a
// no-op without one.
func (f *Feature) Rejoin() {
	if f != nil && f.relay != nil {
		f.relay.Rejoin()
	}
}

// Withdrawn says whether the relay parks Envoy's streams for a withdrawal.
func (f *Feature) Withdrawn() bool {
	return f != nil && f.relay != nil && f.relay.Withdrawn()
}
