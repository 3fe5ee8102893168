package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// Handing Envoy's configuration stream from one Envoy to a new one beside
// it (an Envoy upgrade or a bootstrap change), with kuma-cp seeing one
// stream throughout. kuma-cp allows one stream per node and refuses a
// second until the first one's deregistration has ended (held.go), so the
// relay keeps its ONE upstream stream and moves it:
//
//  1. BeginHandover names the serving Envoy's process: the ADS stream of
//     any other process (SO_PEERCRED, peer.go) is the new Envoy's, a
//     standby: it opens nothing upstream and is answered from what the
//     serving Envoy holds (envoyState), as the cache answers a restart.
//     The serving Envoy's session keeps the upstream stream and its live
//     updates.
//  2. CompleteHandover, once the new Envoy is LIVE, moves the upstream
//     stream at a quiet moment: every response the control plane sent
//     has been ACKed or NACKed by the serving Envoy, and the new Envoy
//     asks for every type the serving one asked for. Under the stream's
//     delivery lock the new Envoy gets what changed since it was answered
//     (the catch-up), the control plane gets the subscriptions that
//     differ, and from then on responses go to the new Envoy and its
//     requests go upstream. The old session parks: the old Envoy keeps
//     what it has while it drains and exits.
//
// Why this is correct for delta xDS (what kuma-cp serves): go-control-plane's
// delta server keeps, per stream and type, the versions it has sent
// (StreamState.resourceVersions), set from initial_resource_versions only
// by the first request of a type and then from each response it sends; it
// does not wait for ACKs to count a resource as held. So the server's view
// is "everything it sent on this stream". At the quiet moment the serving
// Envoy holds exactly that (a NACKed response is the one exception, and the
// new Envoy then lacks it as the old one did), envoyState records it, and
// the catch-up gives the new Envoy the same. initial_resource_versions
// cannot be sent again mid-stream (the server ignores it after a type's
// first request), which is why the new Envoy is brought to the server's
// view rather than the other way round. Requests that answer the relay's
// own responses (nonces "zoneproxy-…", never kuma-cp's, which are numbers)
// are not forwarded: a NACK is logged; a delta ACK that also changes
// subscriptions goes upstream without the nonce, as Envoy's own
// subscription changes do.
//
// State of the world: go-control-plane's SotW server answers a request
// whose nonce is not the type's last one by ignoring it, and treats a
// request without a nonce as a (re)subscription, answering only when the
// version or the names differ. So the new Envoy's ACKs of the relay's
// responses go upstream without their nonce, and after the switch its ACKs
// of the control plane's responses carry the control plane's nonces, as on
// any stream.
//
// A handover is refused while the serving Envoy does not relay a stream the
// control plane answered (it runs on the cache, or is withdrawn): the new
// Envoy is then ended by the agent and the old one keeps serving.

// relayNoncePrefix starts the nonces of the relay's own responses (the
// cache's and a handover's).
const relayNoncePrefix = "zoneproxy-"

// handover is a session's part in a handover.
type handover struct {
	// standby: the new Envoy's session, answered by the relay until it
	// adopts the upstream stream (adopted).
	standby bool
	adopted bool
	// detach is closed once the stream moved to another session; detached
	// says so to the request path.
	detach   chan struct{}
	detached atomic.Bool
	// queued and observed count the control plane's responses handed to
	// the observer and read by it: equal, and nothing pending, is quiet.
	queued, observed atomic.Int64
	sendMu           sync.Mutex // Envoy's stream takes one sender at a time
	switches         chan switchRequest
	// mirror is what the standby sent, per type and name.
	mirror       map[string]map[string]lkgcache.Resource
	observedDone chan struct{}
	pid          int
	ctx          context.Context // the session's; ends with Envoy's stream
}

type switchRequest struct{ result chan error }

// send sends m to Envoy.
func (s *session) send(m any) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.envoy.SendMsg(m)
}

// claim makes s the stream's owner, starting its pump the first time.
func (u *upstream) claim(s *session) {
	u.deliver.Lock()
	u.target = s
	u.deliver.Unlock()
	u.pumpOnce.Do(func() { go func() { u.pumped <- pumpDown(u) }() })
}

// release: s gives up the stream; true if it still owned it, so that it
// closes it.
func (u *upstream) release(s *session) bool {
	u.deliver.Lock()
	defer u.deliver.Unlock()
	if u.target != s {
		return false
	}
	u.target = nil
	return true
}

func (u *upstream) owns(s *session) bool {
	u.deliver.Lock()
	defer u.deliver.Unlock()
	return u.target == s
}

// handoverState is the relay's handover under way.
type handoverState struct {
	mu      sync.Mutex
	on      bool
	serving int      // the serving Envoy's process (group)
	standby *session // the new Envoy's newest ADS session
	// change is a new Envoy of another ADS protocol (protocolchange.go).
	change protocolChange
}

// BeginHandover makes the ADS streams of any process but serving (and its
// process group: a wrapper's child) standbys until EndHandover: those of
// the new Envoy, which the agent starts after this call. The serving
// Envoy's own reconnections stay what they are.
func (r *Relay) BeginHandover(serving int) {
	r.hand.mu.Lock()
	defer r.hand.mu.Unlock()
	r.hand.on, r.hand.serving, r.hand.standby = true, serving, nil
	r.hand.change.begin()
}

// EndHandover ends the handover, done or not. A standby that did not adopt
// the stream keeps being answered until its Envoy leaves.
func (r *Relay) EndHandover() {
	r.hand.mu.Lock()
	defer r.hand.mu.Unlock()
	r.hand.on, r.hand.standby = false, nil
	r.hand.change.end()
}

// ErrHandoverNotReady: the switch found no quiet moment in time.
var ErrHandoverNotReady = errors.New("no quiet moment to move the stream")

// CompleteHandover moves the control plane's stream to the standby
// session, waiting for a quiet moment until ctx ends.
func (r *Relay) CompleteHandover(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if s := r.freshSession(); s != nil {
			return r.completeProtocolChange(ctx, s)
		}
		r.hand.mu.Lock()
		s := r.hand.standby
		r.hand.mu.Unlock()
		if s == nil {
			last = errors.New("the new Envoy has not opened its configuration stream")
		} else {
			req := switchRequest{result: make(chan error, 1)}
			select {
			case s.switches <- req:
				last = <-req.result
				if last == nil {
					return nil
				}
				if !errors.Is(last, ErrHandoverNotReady) {
					return last
				}
			case <-ctx.Done():
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// isStandby: the stream comes from the Envoy a handover waits for.
func (r *Relay) isStandby(pid int) bool {
	r.hand.mu.Lock()
	defer r.hand.mu.Unlock()
	return r.hand.on && pid != 0 && pid != r.hand.serving && pgid(pid) != r.hand.serving
}

// serveStandby answers the new Envoy from what the serving one holds until
// the stream is moved to it, then relays on it.
func (s *session) serveStandby(ctx context.Context) error {
	s.standby = true
	s.switches = make(chan switchRequest)
	s.mirror = map[string]map[string]lkgcache.Resource{}
	s.r.hand.mu.Lock()
	s.r.hand.standby = s
	s.r.hand.mu.Unlock()
	s.r.log.Info("the new Envoy's configuration stream is answered from what the serving Envoy holds until the handover",
		zap.String("stream", s.kind.name()), zap.Int("pid", s.pid))
	snap := &lkgcache.Snapshot{WrittenAt: s.r.opts.Now()}
	cs := s.kind.cacheServer(snap)
	for {
		select {
		case req, ok := <-s.reqs:
			if !ok {
				return nil
			}
			msg, err := s.kind.readRequest(req.raw)
			if err != nil || msg == nil {
				continue
			}
			s.subs.track(s.kind, req.raw, msg)
			if msg.nack {
				s.r.log.Warn("the new Envoy rejected the configuration it was handed", zap.String("type", shortType(msg.typeURL)), zap.String("error", msg.errMsg))
			}
			snap.Types = s.r.envoyState.export() // the newest the serving Envoy holds
			b, err := cs.answer(msg)
			if err != nil || b == nil {
				continue
			}
			s.record(b)
			if err := s.send(&frame{b: b}); err != nil {
				return nil
			}
		case sw := <-s.switches:
			up, err := s.takeOver()
			sw.result <- err
			if err == nil {
				_, err = s.relayOn(ctx, up) // answered already: never a retry
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// record notes what a response of the standby's gives Envoy.
func (s *session) record(b []byte) {
	p, _, err := s.kind.readResponse(b)
	if err != nil || p == nil {
		return
	}
	m := s.mirror[p.typeURL]
	if m == nil || p.replace {
		m = map[string]lkgcache.Resource{}
		s.mirror[p.typeURL] = m
	}
	for _, r := range p.resources {
		m[r.Name] = r
	}
	for _, n := range p.removed {
		delete(m, n)
	}
}

// takeOver moves the upstream stream to s if the moment is quiet.
func (s *session) takeOver() (*upstream, error) {
	r := s.r
	r.upMu.Lock()
	up := r.active
	r.upMu.Unlock()
	if up == nil {
		return nil, errors.New("the serving Envoy has no stream the control plane answered (it runs on the cached configuration, or is withdrawn)")
	}
	up.deliver.Lock()
	defer up.deliver.Unlock()
	old := up.target
	if old == nil || old == s || !old.responded.Load() || old.kind.name() != s.kind.name() {
		return nil, errors.New("the serving Envoy has no stream the control plane answered (it runs on the cached configuration, or is withdrawn)")
	}
	if n := old.queued.Load() - old.observed.Load(); n > 0 || old.obs.outstanding() > 0 {
		return nil, fmt.Errorf("%w: the serving Envoy has not answered every response yet", ErrHandoverNotReady)
	}
	oldTypes, _ := old.subs.typesAndNode()
	newTypes, _ := s.subs.typesAndNode()
	for _, t := range oldTypes {
		if !slices.Contains(newTypes, t) {
			return nil, fmt.Errorf("%w: the new Envoy has not asked for %s yet", ErrHandoverNotReady, shortType(t))
		}
	}
	held := map[string]lkgcache.TypeState{}
	for _, ts := range r.envoyState.export() {
		held[ts.TypeURL] = ts
	}
	for _, t := range newTypes {
		b, err := catchUp(s.kind, t, s.mirror[t], held[t], s.subs.wants(t))
		if err != nil {
			return nil, err
		}
		if b != nil {
			if err := s.send(&frame{b: b}); err != nil {
				return nil, errEnvoyGone
			}
		}
	}
	for _, b := range subscriptionChanges(s.kind, old.subs, s.subs, newTypes) {
		if err := up.send(b); err != nil {
			return nil, fmt.Errorf("the control plane's stream failed while being moved: %w", err)
		}
	}
	up.unlink()
	up.unlink = context.AfterFunc(s.ctx, up.cancel) // the stream now ends with the new Envoy's
	s.obs.carryOver(held)
	s.responded.Store(true)
	s.adopted, s.standby = true, false
	up.target = s
	old.detached.Store(true)
	close(old.detach)
	r.mu.Lock()
	r.subs = s.subs
	r.lastObserver = s.observedDone
	r.mu.Unlock()
	r.log.Info("the control plane's stream moved to the new Envoy; the old one gets no more configuration",
		zap.String("stream", s.kind.name()), zap.Int("pid", s.pid), zap.Int("old pid", old.pid))
	return up, nil
}

// catchUp is what the new Envoy lacks of typeURL next to what the serving
// Envoy holds (nil: nothing).
func catchUp(kind streamKind, typeURL string, sent map[string]lkgcache.Resource, held lkgcache.TypeState, want func(string) bool) ([]byte, error) {
	var changed []lkgcache.Resource
	now := map[string]bool{}
	for _, r := range held.Resources {
		if !want(r.Name) {
			continue
		}
		now[r.Name] = true
		if had, ok := sent[r.Name]; !ok || had.Version != r.Version || (r.Version == "" && !bytes.Equal(had.Body, r.Body)) {
			changed = append(changed, r)
		}
	}
	var removed []string
	for n := range sent {
		if !now[n] {
			removed = append(removed, n)
		}
	}
	if len(changed) == 0 && len(removed) == 0 {
		return nil, nil
	}
	slices.Sort(removed)
	nonce := relayNoncePrefix + "handover-" + shortType(typeURL)
	if kind.incremental() {
		resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: typeURL, SystemVersionInfo: held.Version, RemovedResources: removed, Nonce: nonce}
		for _, r := range changed {
			resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: r.Name, Version: r.Version,
				Resource: &anypb.Any{TypeUrl: r.TypeURL, Value: r.Body}})
		}
		return proto.Marshal(resp)
	}
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: held.Version, Nonce: nonce}
	for _, r := range held.Resources {
		if now[r.Name] {
			resp.Resources = append(resp.Resources, &anypb.Any{TypeUrl: r.TypeURL, Value: r.Body})
		}
	}
	return proto.Marshal(resp)
}

// subscriptionChanges are the requests that bring the control plane from
// the old Envoy's subscriptions to the new one's, for types both asked for.
func subscriptionChanges(kind streamKind, old, cur *subscriptions, types []string) [][]byte {
	var out [][]byte
	for _, t := range types {
		ow, on := old.subscription(t)
		nw, nn := cur.subscription(t)
		if ow == nw && slices.Equal(on, nn) {
			continue
		}
		var b []byte
		var err error
		if kind.incremental() {
			req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t}
			for _, n := range nn {
				if !slices.Contains(on, n) {
					req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
				}
			}
			for _, n := range on {
				if !slices.Contains(nn, n) {
					req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, n)
				}
			}
			switch {
			case nw && !ow:
				req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, "*")
			case ow && !nw:
				req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, "*")
			}
			b, err = proto.Marshal(req)
		} else {
			b, err = proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: t, ResourceNames: nn})
		}
		if err == nil {
			out = append(out, b)
		}
	}
	return out
}

// fromHandover handles, after the switch, a request of the new Envoy's
// that answers a response of the relay's: true if it is not forwarded;
// req is rewritten when it is.
func (s *session) fromHandover(up *upstream, req *envoyRequest) bool {
	msg, err := s.kind.readRequest(req.raw)
	if err != nil || msg == nil || !strings.HasPrefix(msg.nonce, relayNoncePrefix) {
		return false
	}
	s.subs.track(s.kind, req.raw, msg)
	if msg.nack {
		s.r.log.Warn("the new Envoy rejected the configuration it was handed", zap.String("type", shortType(msg.typeURL)), zap.String("error", msg.errMsg))
	}
	var b []byte
	switch {
	case s.kind.incremental() && len(msg.subscribe)+len(msg.unsubscribe) > 0:
		b, err = proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: msg.typeURL,
			ResourceNamesSubscribe: msg.subscribe, ResourceNamesUnsubscribe: msg.unsubscribe})
	case !s.kind.incremental() && !msg.nack:
		ver, _ := s.r.envoyState.versions(msg.typeURL)
		b, err = proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: msg.typeURL, ResourceNames: msg.subscribe, VersionInfo: ver})
	default:
		return true
	}
	if err != nil {
		return true
	}
	_ = up.send(b) // a failed stream shows on the pump
	return true
}

// parkDetached keeps the old Envoy's stream open, answering nothing and
// recording nothing: what it asks for no longer matters to the stream.
func (s *session) parkDetached(ctx context.Context) error {
	for {
		select {
		case _, ok := <-s.reqs:
			if !ok {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// outstanding counts the control plane's responses Envoy has not answered.
func (o *observer) outstanding() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, p := range o.pending {
		if !p.fromCache {
			n++
		}
	}
	return n
}

// carryOver: the new Envoy holds what the old one held, so its first ACK
// of each type updates that state rather than replacing it.
func (o *observer) carryOver(held map[string]lkgcache.TypeState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for t := range held {
		o.resynced[t] = true
	}
}

// typesAndNode lists the types asked for, in order.
func (s *subscriptions) typesAndNode() ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order), s.node != nil
}

// subscription is one type's wildcard and sorted names.
func (s *subscriptions) subscription(typeURL string) (bool, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.types[typeURL]
	if t == nil {
		return false, nil
	}
	var names []string
	for n := range t.names {
		names = append(names, n)
	}
	slices.Sort(names)
	return t.wildcard, names
}

// wants says whether a resource of typeURL is asked for.
func (s *subscriptions) wants(typeURL string) func(string) bool {
	wildcard, names := s.subscription(typeURL)
	return func(n string) bool { return wildcard || slices.Contains(names, n) }
}
