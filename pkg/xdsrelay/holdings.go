package xdsrelay

import (
	"sort"
	"sync"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// holdings is what Envoy holds, per type URL, as far as its ACKs tell. It
// outlives streams: Envoy keeps its resources across reconnects.
type holdings struct {
	mu    sync.Mutex
	types map[string]*typeHolding
	// deferred: ACKed responses are queued and merged when next read (by
	// the cache's persister, off the path of Envoy's ACKs), not at once.
	deferred bool
}

type typeHolding struct {
	version string
	res     map[string]lkgcache.Resource
	acked   []ackedResponse // in order, not merged into res yet
}

type ackedResponse struct {
	p    *pendingResponse
	keep func(lkgcache.Resource) bool
}

// apply records an ACKed response. keep, when set, filters what was held
// before (nil keeps everything).
func (h *holdings) apply(p *pendingResponse, keep func(lkgcache.Resource) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.types[p.typeURL]
	if t == nil {
		t = &typeHolding{res: map[string]lkgcache.Resource{}}
		h.types[p.typeURL] = t
	}
	t.acked = append(t.acked, ackedResponse{p, keep})
	if !h.deferred {
		t.merge()
	}
}

// merge applies the queued responses to res, oldest first.
func (t *typeHolding) merge() {
	for _, a := range t.acked {
		if a.keep != nil {
			for name, r := range t.res {
				if !a.keep(r) {
					delete(t.res, name)
				}
			}
		}
		for _, r := range a.p.resources {
			t.res[r.Name] = r
		}
		for _, name := range a.p.removed {
			delete(t.res, name)
		}
		t.version = a.p.version
	}
	clear(t.acked)
	t.acked = t.acked[:0]
}

// typ is typeURL's holding, merged; nil if none. h.mu is held.
func (h *holdings) typ(typeURL string) *typeHolding {
	t := h.types[typeURL]
	if t != nil {
		t.merge()
	}
	return t
}

// drop forgets resources Envoy unsubscribed from.
func (h *holdings) drop(typeURL string, names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.typ(typeURL); t != nil {
		for _, n := range names {
			delete(t.res, n)
		}
	}
}

// export copies the holdings for the cache; bodies are shared, never
// written to.
func (h *holdings) export() []lkgcache.TypeState {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]lkgcache.TypeState, 0, len(h.types))
	for url := range h.types {
		t := h.typ(url)
		ts := lkgcache.TypeState{TypeURL: url, Version: t.version, Resources: make([]lkgcache.Resource, 0, len(t.res))}
		for _, r := range t.res {
			ts.Resources = append(ts.Resources, r)
		}
		out = append(out, ts)
	}
	return out
}

// Names lists the resources of typeURL Envoy holds, sorted.
func (r *Relay) Names(typeURL string) []string {
	r.held.mu.Lock()
	defer r.held.mu.Unlock()
	var out []string
	if t := r.held.typ(typeURL); t != nil {
		for n := range t.res {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
