package relay

import (
	"sort"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// Resuming: while Envoy is served from the cache, the relay opens the
// control plane's stream itself, with requests that say what Envoy is
// subscribed to and which versions it holds, as Envoy's own reconnect
// would. Once the control plane answers, the relay forwards on that stream:
// Envoy never reconnects, and kuma-cp never sees a stream of this node
// closed on purpose (each close costs its deregistration delay, 10 s by
// default, of refused streams, and then the Dataplane).

// subscriptions is what Envoy asked for on one stream, per type URL, in
// the order it first asked: ADS wants clusters before endpoints and
// listeners before routes.
type subscriptions struct {
	mu    sync.Mutex
	node  *corev3.Node
	order []string
	types map[string]*typeSubscription
	// since holds Envoy's requests since the last snapshot, for the
	// control plane once it accepts the stream that snapshot opened;
	// collected only while such a stream is being opened.
	since      [][]byte
	collecting bool
}

type typeSubscription struct {
	wildcard bool
	names    map[string]bool
}

func newSubscriptions() *subscriptions {
	return &subscriptions{types: map[string]*typeSubscription{}}
}

// track records one of Envoy's requests (raw as received, req as read;
// nil if it could not be).
func (s *subscriptions) track(kind streamKind, raw []byte, req *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.collecting {
		s.since = append(s.since, raw)
	}
	if req == nil {
		return
	}
	if s.node == nil && req.node.GetId() != "" {
		s.node = req.node
	}
	if req.typeURL == "" {
		return
	}
	t := s.types[req.typeURL]
	if t == nil {
		t = &typeSubscription{names: map[string]bool{}}
		s.types[req.typeURL] = t
		s.order = append(s.order, req.typeURL)
		// An empty first subscription is the legacy wildcard (both
		// kinds of ADS).
		t.wildcard = len(req.subscribe) == 0
	}
	if !kind.incremental() {
		// State of the world: each request names the whole set.
		clear(t.names)
		t.wildcard = len(req.subscribe) == 0
	}
	for _, n := range req.subscribe {
		if n == "*" {
			t.wildcard = true
			continue
		}
		t.names[n] = true
	}
	for _, n := range req.unsubscribe {
		if n == "*" {
			t.wildcard = false
		}
		delete(t.names, n)
	}
}

// snapshot returns the requests that open a resumed stream, with what
// Envoy holds now, and starts collecting Envoy's requests anew. Nil when
// Envoy has not identified itself yet.
func (s *subscriptions) snapshot(kind streamKind, envoy *envoyState) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil || len(s.order) == 0 {
		return nil
	}
	s.since, s.collecting = nil, true
	out := make([][]byte, 0, len(s.order))
	for i, typeURL := range s.order {
		t := s.types[typeURL]
		names := make([]string, 0, len(t.names)+1)
		for n := range t.names {
			names = append(names, n)
		}
		sort.Strings(names)
		if t.wildcard && len(names) > 0 {
			names = append([]string{"*"}, names...)
		}
		var node *corev3.Node
		if i == 0 {
			node = s.node
		}
		version, versions := envoy.versions(typeURL)
		b, err := kind.resumeRequest(node, typeURL, names, version, versions)
		if err != nil {
			return nil
		}
		out = append(out, b)
	}
	return out
}

// takeSince returns Envoy's requests since the last snapshot.
func (s *subscriptions) takeSince() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.since
	s.since, s.collecting = nil, false
	return out
}

// nodeCopy is Envoy's node, nil before its first request.
func (s *subscriptions) nodeCopy() *corev3.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return nil
	}
	return proto.Clone(s.node).(*corev3.Node)
}

func deltaResumeRequest(node *corev3.Node, typeURL string, names []string, versions map[string]string) ([]byte, error) {
	return proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{
		Node: node, TypeUrl: typeURL, ResourceNamesSubscribe: names, InitialResourceVersions: versions,
	})
}

func sotwResumeRequest(node *corev3.Node, typeURL string, names []string, version string) ([]byte, error) {
	return proto.Marshal(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNames: names, VersionInfo: version})
}
