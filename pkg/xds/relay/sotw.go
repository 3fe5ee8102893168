package relay

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// sotw is state-of-the-world ADS: every response carries the whole set of
// its type (or of the names asked for).
type sotw struct{}

func (sotw) name() string      { return "state-of-the-world ADS" }
func (sotw) method() string    { return adsMethodPrefix + "StreamAggregatedResources" }
func (sotw) exclusive() bool   { return true }
func (sotw) cacheable() bool   { return true }
func (sotw) incremental() bool { return false }

func (sotw) resumeRequest(node *corev3.Node, typeURL string, names []string, version string, _ map[string]string) ([]byte, error) {
	return sotwResumeRequest(node, typeURL, names, version)
}

func (sotw) readRequest(b []byte) (*request, error) {
	m := &discoveryv3.DiscoveryRequest{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	r := requestOf(m)
	r.subscribe = m.GetResourceNames()
	return r, nil
}

func (sotw) observeRequest(o *observer, req *request) {
	if req.nonce != "" {
		o.answered(req.nonce, req.nack, req.errMsg)
	}
}

func (sotw) readResponse(b []byte) (*pendingResponse, string, error) {
	m := &discoveryv3.DiscoveryResponse{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, "", err
	}
	p := &pendingResponse{typeURL: m.GetTypeUrl(), version: m.GetVersionInfo(), replace: true,
		resources: make([]lkgcache.Resource, 0, len(m.GetResources()))}
	for _, a := range m.GetResources() {
		r, err := p.sotwResource(a)
		if err != nil {
			return nil, "", err
		}
		p.resources = append(p.resources, r)
	}
	return p, m.GetNonce(), nil
}

const resourceWrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// sotwResource is a resource of a state-of-the-world response: unwrapped
// from a discovery Resource, or named by its field 1, which is the name in
// every xDS resource type (Listener, Cluster,
// ClusterLoadAssignment.cluster_name, RouteConfiguration, Secret…). The
// relay does not link those types for the one field.
func (p *pendingResponse) sotwResource(a *anypb.Any) (lkgcache.Resource, error) {
	if a.GetTypeUrl() == resourceWrapperType {
		w := &discoveryv3.Resource{}
		if err := proto.Unmarshal(a.GetValue(), w); err != nil {
			return lkgcache.Resource{}, err
		}
		if w.GetResource() != nil {
			return p.resource(w), nil
		}
	}
	name, err := nameField(a.GetValue())
	return lkgcache.Resource{Name: name, TypeURL: p.intern(a.GetTypeUrl()), Body: a.GetValue()}, err
}

// nameField is field 1 of an xDS resource, its name.
func nameField(msg []byte) (string, error) {
	var name []byte
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return "", fmt.Errorf("malformed resource: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return "", fmt.Errorf("malformed resource field %d: %w", num, protowire.ParseError(m))
		}
		if num == 1 && typ == protowire.BytesType {
			name, _ = protowire.ConsumeBytes(msg)
		}
		msg = msg[m:]
	}
	if !utf8.Valid(name) {
		return "", errors.New("a resource name that is not UTF-8")
	}
	return string(name), nil
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

func (c *sotwCache) answer(req *request) ([]byte, error) {
	t := req.typeURL
	names := slices.Sorted(slices.Values(req.subscribe))
	key := strings.Join(names, "\x00")
	if prev, ok := c.sent[t]; ok && prev == key {
		return nil, nil // an ACK or a NACK of the last answer
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
	return proto.Marshal(resp)
}
