package relay

import (
	"fmt"
	"runtime"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// delta is incremental ADS, what kuma-cp serves.
type delta struct{}

func (delta) name() string      { return "delta ADS" }
func (delta) method() string    { return adsMethodPrefix + "DeltaAggregatedResources" }
func (delta) exclusive() bool   { return true }
func (delta) cacheable() bool   { return true }
func (delta) incremental() bool { return true }

func (delta) resumeRequest(node *corev3.Node, typeURL string, names []string, _ string, versions map[string]string) ([]byte, error) {
	return deltaResumeRequest(node, typeURL, names, versions)
}

func (delta) readRequest(b []byte) (*request, error) {
	m := &discoveryv3.DeltaDiscoveryRequest{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	r := requestOf(m)
	r.subscribe, r.unsubscribe, r.initial = m.GetResourceNamesSubscribe(), m.GetResourceNamesUnsubscribe(), m.GetInitialResourceVersions()
	return r, nil
}

func (delta) observeRequest(o *observer, req *request) {
	if req.nonce == "" {
		o.subscribed(req.typeURL, req.initial)
	}
	if len(req.unsubscribe) > 0 {
		o.r.envoyState.drop(req.typeURL, req.unsubscribe)
	}
	if req.nonce != "" {
		o.answered(req.nonce, req.nack, req.errMsg)
	}
}

func (delta) readResponse(b []byte) (*pendingResponse, string, error) {
	rest, entries, err := splitRepeated(b, deltaResourcesField)
	if err != nil {
		return nil, "", err
	}
	m := &discoveryv3.DeltaDiscoveryResponse{}
	if err := proto.Unmarshal(rest, m); err != nil {
		return nil, "", err
	}
	p := &pendingResponse{typeURL: m.GetTypeUrl(), version: m.GetSystemVersionInfo(), removed: m.GetRemovedResources(),
		resources: make([]lkgcache.Resource, 0, len(entries))}
	r := &discoveryv3.Resource{} // Unmarshal resets it for each entry
	for i, e := range entries {
		if err := proto.Unmarshal(e, r); err != nil {
			return nil, "", err
		}
		if r.GetResource() != nil { // a name-only entry has no body
			p.resources = append(p.resources, p.resource(r))
		}
		if i%yieldEvery == yieldEvery-1 {
			runtime.Gosched() // let forwarding run: see yieldEvery
		}
	}
	for _, n := range m.GetRemovedResourceNames() {
		p.removed = append(p.removed, n.GetName())
	}
	return p, m.GetNonce(), nil
}

func (delta) cacheServer(s *lkgcache.Snapshot) cacheServer {
	return &deltaCache{snap: s, asked: map[string]bool{}}
}

// deltaCache answers as a delta server would from a fixed snapshot: each
// type once on subscription, then for names subscribed later.
type deltaCache struct {
	snap  *lkgcache.Snapshot
	asked map[string]bool
	n     int
}

func (c *deltaCache) answer(req *request) ([]byte, error) {
	t := req.typeURL
	first := !c.asked[t]
	if !first && len(req.subscribe) == 0 {
		return nil, nil // an ACK, a NACK or an unsubscription
	}
	c.asked[t] = true
	wildcard := (first && len(req.subscribe) == 0) || slices.Contains(req.subscribe, "*")
	var held map[string]string
	if first {
		held = req.initial
	}
	resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: t}
	cached := map[string]bool{}
	if ts := c.snap.Type(t); ts != nil {
		resp.SystemVersionInfo = ts.Version
		for _, r := range ts.Resources {
			cached[r.Name] = true
			if !wildcard && !slices.Contains(req.subscribe, r.Name) {
				continue
			}
			if v, ok := held[r.Name]; ok && v == r.Version && v != "" {
				continue // Envoy has it
			}
			resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: r.Name, Version: r.Version,
				Resource: &anypb.Any{TypeUrl: r.TypeURL, Value: r.Body}})
		}
	}
	if first && wildcard {
		for name := range held {
			if !cached[name] {
				resp.RemovedResources = append(resp.RemovedResources, name)
			}
		}
		slices.Sort(resp.RemovedResources)
	}
	if len(resp.Resources) == 0 && len(resp.RemovedResources) == 0 && !(first && wildcard) {
		return nil, nil
	}
	c.n++
	resp.Nonce = fmt.Sprintf("zoneproxy-lkg-%d", c.n)
	return proto.Marshal(resp)
}
