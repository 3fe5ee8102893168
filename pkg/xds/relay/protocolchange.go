package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// A handover whose new Envoy speaks another ADS protocol than the serving
// one: the control plane's bootstrap changed its api_type (kuma-cp 3.0
// serves delta ADS only, 2.14 gave state of the world). There is no stream
// to move: the control plane does not answer the serving Envoy's protocol.
// The new Envoy's session opens its own stream, as any Envoy's does, and
// the serving Envoy's protocol is retired: its sessions open nothing more
// upstream (the control plane allows one stream per node, and a reconnecting
// old Envoy would close the new one's) and park, so the old Envoy keeps what
// it has while it drains. A handover that fails brings the protocol back.

// errRetiredKind: a handover gave the proxy's stream to an Envoy of
// another ADS protocol.
var errRetiredKind = errors.New("a new Envoy speaks the control plane's ADS protocol now")

// protocolChange is the handover state of a change of ADS protocol.
type protocolChange struct {
	lastKind     string   // the newest serving ADS session's protocol
	servingKind  string   // lastKind when the handover began
	fresh        *session // the new Envoy's session, of another protocol
	retired      string   // the protocol no session opens upstream any more
	freshSettled bool     // the handover completed: the retirement stays
}

// sawKind records the protocol of the newest serving ADS session.
func (h *handoverState) sawKind(kind streamKind) {
	h.mu.Lock()
	h.change.lastKind = kind.name()
	h.mu.Unlock()
}

func (h *protocolChange) begin() {
	h.servingKind, h.fresh, h.freshSettled = h.lastKind, nil, false
}

// end: a handover of another protocol that did not complete gives the
// serving Envoy's protocol back.
func (h *protocolChange) end() {
	if h.fresh != nil && !h.freshSettled {
		h.retired = ""
	}
	h.fresh = nil
}

// changesProtocol: s is the new Envoy's session and speaks another
// protocol than the serving Envoy: it opens its own stream (not a standby)
// and the serving protocol is retired in place of any retired before (a
// rollback brings back the protocol an upgrade retired).
func (r *Relay) changesProtocol(kind streamKind, s *session) bool {
	r.hand.mu.Lock()
	defer r.hand.mu.Unlock()
	if on := r.hand.on; !on || s.pid == 0 || s.pid == r.hand.serving || pgid(s.pid) == r.hand.serving {
		return false
	}
	h := &r.hand.change
	if h.servingKind == "" || kind.name() == h.servingKind {
		return false
	}
	h.fresh, h.retired = s, h.servingKind
	r.log.Info("the new Envoy speaks another ADS protocol than the serving one: it opens its own stream to the control plane, and the serving Envoy's protocol opens none any more",
		zap.String("from", h.servingKind), zap.String("to", kind.name()), zap.Int("pid", s.pid))
	return true
}

func (r *Relay) isRetired(kind streamKind) bool {
	r.hand.mu.Lock()
	defer r.hand.mu.Unlock()
	return r.hand.change.retired != "" && r.hand.change.retired == kind.name()
}

func (r *Relay) freshSession() *session {
	r.hand.mu.Lock()
	defer r.hand.mu.Unlock()
	return r.hand.change.fresh
}

// completeProtocolChange waits until the control plane answered the new
// Envoy's own stream.
func (r *Relay) completeProtocolChange(ctx context.Context, s *session) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !s.responded.Load() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: the control plane has not answered the new Envoy's %s stream", ctx.Err(), s.kind.name())
		case <-tick.C:
		}
	}
	r.hand.mu.Lock()
	r.hand.change.freshSettled = true
	r.hand.mu.Unlock()
	r.log.Info("the control plane answers the new Envoy's stream; the old Envoy's protocol is retired", zap.String("stream", s.kind.name()))
	return nil
}

// parkRetired holds a retired protocol's stream open, answering nothing:
// the old Envoy reconnecting while it drains keeps what it has.
func parkRetired(stream grpc.ServerStream) error {
	for {
		if err := stream.RecvMsg(&frame{}); err != nil {
			return nil
		}
	}
}
