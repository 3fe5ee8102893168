package xdsrelay

import (
	"sort"
	"sync"
	"unsafe"

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
	res     map[string]heldResource
}

// heldResource is a resource whose body aliases slab; its strings are
// its own.
type heldResource struct {
	lkgcache.Resource
	slab *slab
}

// apply records an ACKed response. keep, when set, filters what was held
// before (nil keeps everything). The response's resources take stable
// copies of their names, versions and type URLs (reusing those held
// already), and a reference to its slab each.
func (h *holdings) apply(p *pendingResponse, keep func(lkgcache.Resource) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.types[p.typeURL]
	if t == nil {
		t = &typeHolding{res: map[string]heldResource{}}
		h.types[p.typeURL] = t
	}
	var rel releases
	defer rel.flush()
	if keep != nil {
		for name, r := range t.res {
			if !keep(r.Resource) {
				delete(t.res, name)
				rel.add(r.slab)
			}
		}
	}
	// The response's references come first: a name it carries twice
	// releases one of them in the loop, and the batched releases below may
	// be sent before the loop ends.
	p.slab.hold(int32(len(p.resources)))
	var c copies
	typeURL := ""
	for i := range p.resources {
		r := &p.resources[i]
		if old, ok := t.res[r.Name]; ok {
			r.Name = old.Name
			if r.Version == old.Version {
				r.Version = old.Version
			} else {
				r.Version = c.of(r.Version)
			}
			rel.add(old.slab)
		} else {
			r.Name, r.Version = c.of(r.Name), c.of(r.Version)
		}
		if r.TypeURL != typeURL {
			typeURL = c.of(r.TypeURL)
		}
		r.TypeURL = typeURL
		t.res[r.Name] = heldResource{*r, p.slab}
	}
	for _, name := range p.removed {
		if old, ok := t.res[name]; ok {
			delete(t.res, name)
			rel.add(old.slab)
		}
	}
	t.version = p.version
}

// copies makes the strings apply keeps, a few allocations per response
// rather than one each.
type copies struct{ buf []byte }

func (c *copies) of(s string) string {
	if s == "" {
		return ""
	}
	if cap(c.buf)-len(c.buf) < len(s) {
		c.buf = make([]byte, 0, max(len(s), 8<<10))
	}
	start := len(c.buf)
	c.buf = append(c.buf, s...)
	return unsafe.String(&c.buf[start], len(s)) // never written again
}

// drop forgets resources Envoy unsubscribed from.
func (h *holdings) drop(typeURL string, names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.types[typeURL]; t != nil {
		var rel releases
		defer rel.flush()
		for _, n := range names {
			if old, ok := t.res[n]; ok {
				delete(t.res, n)
				rel.add(old.slab)
			}
		}
	}
}

// export copies the holdings for the cache, bodies into one buffer of
// their own: the slabs they alias are reused.
func (h *holdings) export() []lkgcache.TypeState {
	h.mu.Lock()
	defer h.mu.Unlock()
	size := 0
	for _, t := range h.types {
		for _, r := range t.res {
			size += len(r.Body)
		}
	}
	bodies := make([]byte, 0, size)
	out := make([]lkgcache.TypeState, 0, len(h.types))
	for url, t := range h.types {
		ts := lkgcache.TypeState{TypeURL: url, Version: t.version, Resources: make([]lkgcache.Resource, 0, len(t.res))}
		for _, r := range t.res {
			res := r.Resource
			start := len(bodies)
			bodies = append(bodies, r.Body...)
			res.Body = bodies[start:len(bodies):len(bodies)]
			ts.Resources = append(ts.Resources, res)
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
