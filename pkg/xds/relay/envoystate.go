package relay

import (
	"sort"
	"sync"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// envoyState is what Envoy holds, per type URL, as far as its ACKs tell.
// It outlives streams: Envoy keeps its resources across reconnects.
//
// Resource bodies are the decoded responses' bytes; nothing writes to
// them, so the cache shares them rather than copying.
type envoyState struct {
	mu    sync.Mutex
	types map[string]*typeState
}

type typeState struct {
	version   string
	resources map[string]lkgcache.Resource
}

// apply records an ACKed response. keep, when set, filters what was held
// before (nil keeps everything).
func (s *envoyState) apply(p *pendingResponse, keep func(lkgcache.Resource) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.types[p.typeURL]
	if t == nil {
		t = &typeState{resources: map[string]lkgcache.Resource{}}
		s.types[p.typeURL] = t
	}
	if keep != nil {
		for name, r := range t.resources {
			if !keep(r) {
				delete(t.resources, name)
			}
		}
	}
	for _, r := range p.resources {
		t.resources[r.Name] = r
	}
	for _, name := range p.removed {
		delete(t.resources, name)
	}
	t.version = p.version
}

// drop forgets resources Envoy unsubscribed from.
func (s *envoyState) drop(typeURL string, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.types[typeURL]; t != nil {
		for _, n := range names {
			delete(t.resources, n)
		}
	}
}

// export is the state for the cache, which owns the slices it gets and
// shares the bodies.
func (s *envoyState) export() []lkgcache.TypeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]lkgcache.TypeState, 0, len(s.types))
	for url, t := range s.types {
		ts := lkgcache.TypeState{TypeURL: url, Version: t.version, Resources: make([]lkgcache.Resource, 0, len(t.resources))}
		for _, r := range t.resources {
			ts.Resources = append(ts.Resources, r)
		}
		out = append(out, ts)
	}
	return out
}

// versions is what Envoy holds of typeURL: the type's version and each
// resource's.
func (s *envoyState) versions(typeURL string) (string, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.types[typeURL]
	if t == nil {
		return "", nil
	}
	out := make(map[string]string, len(t.resources))
	for name, r := range t.resources {
		if r.Version != "" {
			out[name] = r.Version
		}
	}
	return t.version, out
}

// Names lists the resources of typeURL Envoy holds, sorted.
func (r *Relay) Names(typeURL string) []string {
	r.envoyState.mu.Lock()
	defer r.envoyState.mu.Unlock()
	var out []string
	if t := r.envoyState.types[typeURL]; t != nil {
		for n := range t.resources {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
