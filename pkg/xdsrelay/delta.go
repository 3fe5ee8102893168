package xdsrelay

import (
	"fmt"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// delta is incremental ADS, what kuma-cp serves.
type delta struct{}

func (delta) name() string    { return "delta ADS" }
func (delta) method() string  { return adsMethodPrefix + "DeltaAggregatedResources" }
func (delta) exclusive() bool { return true }
func (delta) cacheable() bool { return true }

func (delta) incremental() bool { return true }

func (delta) resumeRequest(node *corev3.Node, typeURL string, names []string, _ string, versions map[string]string) ([]byte, error) {
	return deltaResumeRequest(node, typeURL, names, versions)
}

func (delta) readRequest(b []byte) (*request, error) { return scanDeltaRequest(b) }

func (delta) observeRequest(o *observer, req *request) {
	if req.nonce == "" {
		o.subscribed(req.typeURL, req.initial)
	}
	if len(req.unsubscribe) > 0 {
		o.r.held.drop(req.typeURL, req.unsubscribe)
	}
	if req.nonce != "" {
		o.answered(req.nonce, req.nack, req.errMsg)
	}
}

func (delta) readResponse(b []byte) (*pendingResponse, string, error) { return scanDeltaResponse(b) }

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

func (c *deltaCache) answer(req *request) []byte {
	t := req.typeURL
	first := !c.asked[t]
	if !first && len(req.subscribe) == 0 {
		return nil // an ACK, a NACK or an unsubscription
	}
	c.asked[t] = true
	wildcard := (first && len(req.subscribe) == 0) || slices.Contains(req.subscribe, "*")
	var held map[string]string
	if first {
		held = req.initial
	}
	var version string
	var res []lkgcache.Resource
	var removed []string
	cached := map[string]bool{}
	if ts := c.snap.Type(t); ts != nil {
		version = ts.Version
		for _, r := range ts.Resources {
			cached[r.Name] = true
			if !wildcard && !slices.Contains(req.subscribe, r.Name) {
				continue
			}
			if v, ok := held[r.Name]; ok && v == r.Version && v != "" {
				continue // Envoy has it
			}
			res = append(res, r)
		}
	}
	if first && wildcard {
		for name := range held {
			if !cached[name] {
				removed = append(removed, name)
			}
		}
		slices.Sort(removed)
	}
	if len(res) == 0 && len(removed) == 0 && !(first && wildcard) {
		return nil
	}
	c.n++
	return deltaResponseBytes(t, version, fmt.Sprintf("zoneproxy-lkg-%d", c.n), res, removed)
}
