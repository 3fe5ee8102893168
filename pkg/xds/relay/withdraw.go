package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
)

// Withdrawing: kuma-cp reads a Dataplane, with each listener's state, only
// from the node metadata of the first request of an accepted stream, and
// hands a zone egress to the zone's sidecars while its Dataplane has a
// Ready ZoneEgress listener (resolveZoneEgresses). So to leave the egress
// set before its listeners close, the proxy closes its stream and opens a
// new one whose Dataplane says NotReady: kuma-cp refuses it until it has
// deleted the old Dataplane (its deregistration delay), then registers the
// NotReady one. From then on no sidecar is sent new connections.

// errWithdrawn ends attempts to open a stream of the proxy's Ready
// Dataplane once it is withdrawn.
var errWithdrawn = errors.New("the proxy is withdrawn from the control plane")

type withdrawal struct {
	on atomic.Bool
	mu sync.Mutex
	up *upstream // the NotReady Dataplane's stream
}

func (w *withdrawal) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.up != nil {
		w.up.close()
		w.up = nil
	}
}

// Withdraw ends the proxy's stream and registers it anew with the node
// mark returns (a Dataplane whose listeners are NotReady). Envoy keeps its
// configuration and its stream to the relay, which answers nothing more.
// It returns once the control plane accepted the new stream (the old
// Dataplane is gone by then), or with why not; ctx bounds the wait.
//
// A withdrawal that fails leaves the proxy not withdrawn: the flag is
// cleared so that the next Envoy stream opens (and is served the cache if
// kuma-cp is away), while a session parked meanwhile stays parked, so that
// a draining Envoy is not registered Ready again.
func (r *Relay) Withdraw(ctx context.Context, mark func(*corev3.Node) error) (err error) {
	r.withdrawn.on.Store(true)
	var attempted bool
	var lastStreamErr error
	defer func() {
		if err != nil {
			r.withdrawn.close()
			r.withdrawn.on.Store(false)
			r.setUpstream(stateAfterFailedWithdrawal(attempted, lastStreamErr))
		}
	}()
	r.upMu.Lock()
	if r.active != nil {
		r.active.close() // Envoy's session parks
		r.active = nil
	}
	r.upMu.Unlock()
	r.mu.Lock()
	subs := r.subs
	r.mu.Unlock()
	var node *corev3.Node
	if subs != nil {
		node = subs.nodeCopy()
	}
	if node == nil {
		return errors.New("Envoy has not opened its configuration stream yet")
	}
	if err := mark(node); err != nil {
		return err
	}
	// Clusters, wildcard: the first type any proxy asks for.
	first, err := deltaResumeRequest(node, clusterTypeURL, nil, nil)
	if err != nil {
		return err
	}
	var held heldRetries
	for attempt := 1; ; attempt++ {
		// The stream outlives ctx, which bounds only the wait for it.
		octx, ocancel := context.WithCancel(context.Background())
		unwatch := context.AfterFunc(ctx, ocancel)
		up, err := r.dialUpstream(octx, delta{}.method(), r.withAgentMetadata(delta{}, [][]byte{first}))
		attempted = true
		if err == nil {
			if _, err = up.recv(); err == nil && unwatch() {
				r.withdrawn.mu.Lock()
				r.withdrawn.up = up
				r.withdrawn.mu.Unlock()
				go discard(up)
				r.setUpstream(Withdrawn)
				return nil
			}
			up.close()
		}
		unwatch()
		ocancel()
		if err != nil && ctx.Err() == nil {
			lastStreamErr = err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("kuma-cp did not accept the withdrawn Dataplane's stream in time: %w", err)
		}
		se := classify(err)
		if !se.Held {
			return fmt.Errorf("kuma-cp did not take the withdrawn Dataplane: %s", se.Message)
		}
		t := time.NewTimer(held.next(r.opts.Backoff, r.opts.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("kuma-cp still held this proxy's stream: %w", ctx.Err())
		case <-t.C:
		}
		r.log.Debug("kuma-cp still holds this proxy's stream; asking again", zap.Int("attempt", attempt))
	}
}

// stateAfterFailedWithdrawal is what kuma-cp makes of the proxy once a
// withdrawal failed: its stream is closed either way, so never Connected.
// A stream that got no answer before the wait ended is Unreachable.
func stateAfterFailedWithdrawal(attempted bool, streamErr error) UpstreamState {
	switch {
	case !attempted:
		return NoStream
	case streamErr == nil:
		return Unreachable
	}
	switch se := classify(streamErr); {
	case se.Held:
		return Held
	case se.Unreachable:
		return Unreachable
	}
	return Refused
}

// Withdrawn says whether the relay keeps Envoy's streams parked for a
// withdrawal: no stream of Envoy's reaches kuma-cp until Rejoin.
func (r *Relay) Withdrawn() bool { return r.withdrawn.on.Load() }

// Rejoin ends a withdrawal: the next stream of Envoy's registers the
// proxy as it is (Ready) again, once kuma-cp lets go of the NotReady one.
func (r *Relay) Rejoin() {
	r.withdrawn.close()
	r.withdrawn.on.Store(false)
}

// discard reads and drops what the control plane sends on the withdrawn
// Dataplane's stream: it is not Envoy's configuration.
func discard(up *upstream) {
	for {
		if _, err := up.recv(); err != nil {
			return
		}
	}
}

const clusterTypeURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
