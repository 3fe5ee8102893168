package xdsrelay

import (
	"fmt"
	"slices"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// sotw is state-of-the-world ADS: every response carries the whole set of
// its type (or of the names asked for).
type sotw struct{}

func (sotw) name() string { return "state-of-the-world ADS" }
func (sotw) method() string {
	return discoveryv3.AggregatedDiscoveryService_StreamAggregatedResources_FullMethodName
}
func (sotw) exclusive() bool { return true }
func (sotw) cacheable() bool { return true }

func (sotw) observeRequest(o *observer, b []byte) (proto.Message, error) {
	req := &discoveryv3.DiscoveryRequest{}
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, err
	}
	if n := req.GetResponseNonce(); n != "" {
		o.answered(n, req.GetErrorDetail() != nil, req.GetErrorDetail().GetMessage())
	}
	return req, nil
}

func (sotw) observeResponse(o *observer, b []byte, fromCache bool) error {
	p, nonce, err := scanSotwResponse(b)
	if err != nil {
		return err
	}
	p.fromCache = fromCache
	o.sent(nonce, p)
	return nil
}

func (sotw) cacheServer(s *lkgcache.Snapshot) cacheServer {
	return &sotwCache{snap: s, sent: map[string]string{}}
}

// sotwCache answers each type, and each change of the names asked for.
type sotwCache struct {
	snap *lkgcache.Snapshot
	sent map[string]string // type URL -> names answered for
	n    int
}

func (c *sotwCache) answer(m proto.Message) proto.Message {
	req := m.(*discoveryv3.DiscoveryRequest)
	t := req.GetTypeUrl()
	names := slices.Sorted(slices.Values(req.GetResourceNames()))
	key := strings.Join(names, "\x00")
	if prev, ok := c.sent[t]; ok && prev == key {
		return nil // an ACK or a NACK of the last answer
	}
	c.sent[t] = key
	c.n++
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: t, Nonce: fmt.Sprintf("zoneproxy-lkg-%d", c.n),
		VersionInfo: fmt.Sprintf("zoneproxy-lkg-%d", c.snap.WrittenAt.Unix())}
	all := len(names) == 0 || slices.Contains(names, "*")
	if ts := c.snap.Type(t); ts != nil {
		if ts.Version != "" {
			resp.VersionInfo = ts.Version
		}
		for _, r := range ts.Resources {
			if all || slices.Contains(names, r.Name) {
				resp.Resources = append(resp.Resources, &anypb.Any{TypeUrl: r.TypeURL, Value: r.Body})
			}
		}
	}
	return resp
}
