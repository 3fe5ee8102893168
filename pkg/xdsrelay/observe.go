package xdsrelay

import (
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

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
	slab    *slab // its bytes, which resources alias; one reference
}

// names are copies: the resources' may alias a slab.
func (p *pendingResponse) names() []string {
	out := make([]string, 0, len(p.resources))
	for _, r := range p.resources {
		out = append(out, strings.Clone(r.Name))
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
}

func newObserver(r *Relay) *observer {
	return &observer{r: r, pending: map[string]*pendingResponse{}, initial: map[string]map[string]string{}, resynced: map[string]bool{}}
}

// response observes a response sent to Envoy, in b, which aliases sl
// (nil: bytes that are not recycled); the pending response takes sl's
// reference.
func (o *observer) response(d dialect, b []byte, sl *slab, fromCache bool) error {
	p, nonce, err := d.readResponse(b)
	if err != nil || p == nil {
		sl.release(1)
		return err
	}
	p.fromCache, p.slab = fromCache, sl
	o.mu.Lock()
	o.seq++
	p.seq = o.seq
	old := o.pending[nonce]
	o.pending[nonce] = p
	o.mu.Unlock()
	if old != nil {
		old.slab.release(1)
	}
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
			if q != p {
				q.slab.release(1)
			}
		}
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
	defer p.slab.release(1) // the pending response's reference
	if nack {
		o.r.rejected(p, errMsg)
		return
	}
	o.r.held.apply(p, keep)
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
			c.Update(r.held.export) // read once updates settle, off this path
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
