package xdsrelay

import (
	"fmt"
	"slices"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// delta is incremental ADS, what kuma-cp serves.
type delta struct{}

func (delta) name() string { return "delta ADS" }
func (delta) method() string {
	return discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResources_FullMethodName
}
func (delta) exclusive() bool { return true }
func (delta) cacheable() bool { return true }

func (delta) observeRequest(o *observer, b []byte) (proto.Message, error) {
	req := &discoveryv3.DeltaDiscoveryRequest{}
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, err
	}
	t := req.GetTypeUrl()
	if req.GetResponseNonce() == "" {
		o.subscribed(t, req.GetInitialResourceVersions())
	}
	if un := req.GetResourceNamesUnsubscribe(); len(un) > 0 {
		o.r.held.drop(t, un)
	}
	if n := req.GetResponseNonce(); n != "" {
		o.answered(n, req.GetErrorDetail() != nil, req.GetErrorDetail().GetMessage())
	}
	return req, nil
}

func (delta) observeResponse(o *observer, b []byte, fromCache bool) error {
	p, nonce, err := scanDeltaResponse(b)
	if err != nil {
		return err
	}
	p.fromCache = fromCache
	o.sent(nonce, p)
	return nil
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

func (c *deltaCache) answer(m proto.Message) proto.Message {
	req := m.(*discoveryv3.DeltaDiscoveryRequest)
	t := req.GetTypeUrl()
	sub := req.GetResourceNamesSubscribe()
	first := !c.asked[t]
	if !first && len(sub) == 0 {
		return nil // an ACK, a NACK or an unsubscription
	}
	c.asked[t] = true
	wildcard := (first && len(sub) == 0) || slices.Contains(sub, "*")
	held := map[string]string{}
	if first {
		held = req.GetInitialResourceVersions()
	}
	c.n++
	resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: t, Nonce: fmt.Sprintf("zoneproxy-lkg-%d", c.n)}
	ts := c.snap.Type(t)
	cached := map[string]bool{}
	if ts != nil {
		resp.SystemVersionInfo = ts.Version
		for _, r := range ts.Resources {
			cached[r.Name] = true
			if (!wildcard && !slices.Contains(sub, r.Name)) || (held[r.Name] == r.Version && r.Version != "") {
				continue
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
		return nil
	}
	return resp
}
