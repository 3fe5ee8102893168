package xdsrelay

import (
	"fmt"
	"slices"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
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

func (s sotw) observeResponse(o *observer, b []byte, fromCache bool) (proto.Message, error) {
	resp := &discoveryv3.DiscoveryResponse{}
	if err := proto.Unmarshal(b, resp); err != nil {
		return nil, err
	}
	s.observeResponseMsg(o, resp, fromCache)
	return resp, nil
}

func (sotw) observeResponseMsg(o *observer, m proto.Message, fromCache bool) {
	resp := m.(*discoveryv3.DiscoveryResponse)
	p := &pendingResponse{typeURL: resp.GetTypeUrl(), version: resp.GetVersionInfo(), fromCache: fromCache, replace: true}
	for _, a := range resp.GetResources() {
		p.resources = append(p.resources, sotwResource(a))
	}
	o.sent(resp.GetNonce(), p)
}

const resourceWrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// sotwResource names a resource: unwrapped from a discovery Resource, or
// by field 1, which is the name in every xDS resource type (Listener,
// Cluster, ClusterLoadAssignment.cluster_name, RouteConfiguration, Secret…).
func sotwResource(a *anypb.Any) lkgcache.Resource {
	if a.GetTypeUrl() == resourceWrapperType {
		w := &discoveryv3.Resource{}
		if proto.Unmarshal(a.GetValue(), w) == nil && w.GetResource() != nil {
			return lkgcache.Resource{Name: w.GetName(), Version: w.GetVersion(), TypeURL: w.GetResource().GetTypeUrl(), Body: w.GetResource().GetValue()}
		}
	}
	return lkgcache.Resource{Name: firstStringField(a.GetValue()), TypeURL: a.GetTypeUrl(), Body: a.GetValue()}
}

func firstStringField(msg []byte) string {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return ""
		}
		msg = msg[n:]
		if num == 1 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(msg)
			return string(v)
		}
		if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
			return ""
		}
		msg = msg[n:]
	}
	return ""
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
