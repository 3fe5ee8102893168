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
}

type typeHolding struct {
	version string
	res     map[string]lkgcache.Resource
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
	if keep != nil {
		for name, r := range t.res {
			if !keep(r) {
				delete(t.res, name)
			}
		}
	}
	for _, r := range p.resources {
		t.res[r.Name] = r
	}
	for _, name := range p.removed {
		delete(t.res, name)
	}
	t.version = p.version
}

// drop forgets resources Envoy unsubscribed from.
func (h *holdings) drop(typeURL string, names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.types[typeURL]; t != nil {
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
	for url, t := range h.types {
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
	if t := r.held.types[typeURL]; t != nil {
		for n := range t.res {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
