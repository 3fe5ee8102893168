package relay

import (
	"strings"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// observerWait bounds how long a session's observer waits for the one
// before it.
const observerWait = 5 * time.Second

// observedMessage is one message for a session's observer: a request of
// Envoy's, a response from the control plane as received, one from the
// cache, or a barrier, closed once everything before it is observed.
type observedMessage struct {
	req     *request
	resp    *receivedFrame
	cached  []byte
	barrier chan struct{}
}

// observeAll observes a session's messages on a goroutine of its own, so
// forwarding never waits for it. Envoy's requests come in Envoy's order,
// each once it was forwarded; a response comes before it is sent to
// Envoy, so before Envoy's ACK of it. (A response may come before the
// request it answers: only its ACK makes it count.) A response from the
// control plane is read only when the next message comes (Envoy's answer
// to it, usually) or the stream ends: until then Envoy is still receiving
// and applying it, and reading 1 MB beside it would take a core from
// Envoy and from the forwarding.
//
// It starts once the previous session's observer is done (prev), or after
// observerWait: a session that outlived its stream must not hold up the
// next one's configuration for long.
func (s *session) observeAll(prev <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if prev != nil {
		t := time.NewTimer(observerWait)
		select {
		case <-prev:
		case <-t.C:
			s.r.log.Debug("the previous xDS stream's observer is still busy; observing this one meanwhile")
		}
		t.Stop()
	}
	var unread *receivedFrame // the control plane's last response, not read yet
	readUnread := func() {
		if unread == nil {
			return
		}
		// What is kept of it are copies the decoding made.
		readContiguous(unread.buf, func(b []byte) { s.observeResponse(b, false) })
		unread.free()
		unread = nil
		s.observed.Add(1)
	}
	for m := range s.toObserver {
		readUnread()
		switch {
		case m.req != nil:
			s.kind.observeRequest(s.obs, m.req)
		case m.resp != nil:
			unread = m.resp
		case m.barrier != nil:
			close(m.barrier)
		default:
			s.observeResponse(m.cached, true)
		}
	}
	readUnread()
}

func (s *session) observeResponse(b []byte, fromCache bool) {
	if err := s.obs.response(s.kind, b, fromCache); err != nil {
		s.r.log.Debug("an xDS response could not be decoded; forwarded anyway", zap.Error(err), zap.Bool("cached", fromCache))
	}
}

// pendingResponse is a response sent to Envoy and not yet ACKed.
type pendingResponse struct {
	seq       uint64
	typeURL   string
	version   string
	resources []lkgcache.Resource
	removed   []string
	fromCache bool
	// replace: a state-of-the-world response, the whole set of its type.
	replace bool
}

// resource is what the relay keeps of a discovery Resource that carries
// a body: the body is the decoded Any's value, a copy of its own.
func (p *pendingResponse) resource(r *discoveryv3.Resource) lkgcache.Resource {
	name := r.GetName()
	if name == "" {
		name = r.GetResourceName().GetName()
	}
	return lkgcache.Resource{Name: name, Version: r.GetVersion(), TypeURL: p.intern(r.GetResource().GetTypeUrl()), Body: r.GetResource().GetValue()}
}

// intern shares the response's type URL with its resources of that type:
// one string held, not one per resource.
func (p *pendingResponse) intern(typeURL string) string {
	if typeURL == p.typeURL {
		return p.typeURL
	}
	return typeURL
}

func (p *pendingResponse) names() []string {
	out := make([]string, 0, len(p.resources))
	for _, r := range p.resources {
		out = append(out, r.Name)
	}
	return out
}

// observer follows one Envoy stream's nonces and subscriptions.
type observer struct {
	r       *Relay
	mu      sync.Mutex
	seq     uint64
	pending map[string]*pendingResponse
	// initial: the versions Envoy declared when it subscribed to a type on
	// this stream; resynced: its first ACK on this stream was applied.
	initial  map[string]map[string]string
	resynced map[string]bool
	answer   chan struct{} // closed and replaced at each of Envoy's answers
}

func newObserver(r *Relay) *observer {
	return &observer{r: r, pending: map[string]*pendingResponse{}, initial: map[string]map[string]string{}, resynced: map[string]bool{}}
}

// response observes a response sent to Envoy, encoded in b.
func (o *observer) response(kind streamKind, b []byte, fromCache bool) error {
	p, nonce, err := kind.readResponse(b)
	if err != nil || p == nil {
		return err
	}
	p.fromCache = fromCache
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	p.seq = o.seq
	o.pending[nonce] = p
	return nil
}

// subscribed records the versions Envoy holds when it first asks for a
// type on this stream.
func (o *observer) subscribed(typeURL string, versions map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.initial[typeURL]; !ok {
		o.initial[typeURL] = versions
	}
}

// answered handles an ACK or a NACK (with Envoy's error) of nonce.
func (o *observer) answered(nonce string, nack bool, errMsg string) {
	o.mu.Lock()
	p := o.pending[nonce]
	if p == nil {
		o.mu.Unlock()
		return
	}
	// Older responses of the type will not be ACKed any more.
	for n, q := range o.pending {
		if q.typeURL == p.typeURL && q.seq <= p.seq {
			delete(o.pending, n)
		}
	}
	if o.answer != nil {
		close(o.answer)
		o.answer = nil
	}
	var keep func(lkgcache.Resource) bool
	if !nack {
		switch {
		case p.replace:
			keep = func(lkgcache.Resource) bool { return false }
		case !o.resynced[p.typeURL]:
			// On a new stream Envoy kept only what it declared.
			init := o.initial[p.typeURL]
			keep = func(r lkgcache.Resource) bool { v, ok := init[r.Name]; return ok && v == r.Version }
		}
		o.resynced[p.typeURL] = true
	}
	o.mu.Unlock()
	if nack {
		o.r.rejected(p, errMsg)
		return
	}
	o.r.envoyState.apply(p, keep)
	o.r.warnNamedPorts(p)
	o.r.accepted(p)
}

func (r *Relay) rejected(p *pendingResponse, msg string) {
	r.met.rejected(shortType(p.typeURL))
	names := p.names()
	r.log.Warn("Envoy rejected a configuration", zap.String("type", shortType(p.typeURL)),
		zap.Strings("resources", names), zap.String("version", p.version), zap.String("error", msg), zap.Bool("cached", p.fromCache))
	if f := r.opts.Events.Rejected; f != nil {
		f(Rejection{TypeURL: p.typeURL, Names: names, Version: p.version, Message: msg, FromCache: p.fromCache})
	}
}

func (r *Relay) accepted(p *pendingResponse) {
	if !p.fromCache {
		r.mu.Lock()
		r.lastErr = nil
		r.mu.Unlock()
		if c := r.opts.Cache; c != nil {
			c.Update(r.envoyState.export) // read once updates settle, off this path
		}
		r.leaveCache()
	}
	if f := r.opts.Events.Accepted; f != nil {
		f(Acceptance{TypeURL: p.typeURL, Names: p.names(), Version: p.version, FromCache: p.fromCache})
	}
}

// shortType is the message name of a type URL, e.g. "Listener".
func shortType(url string) string {
	return url[strings.LastIndex(url, ".")+1:]
}

// cachedUnanswered reports whether Envoy has yet to answer a cached
// response, and a channel closed at its next answer.
func (o *observer) cachedUnanswered() (bool, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.answer == nil {
		o.answer = make(chan struct{})
	}
	for _, p := range o.pending {
		if p.fromCache {
			return true, o.answer
		}
	}
	return false, o.answer
}
