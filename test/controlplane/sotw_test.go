package controlplane

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// sotwClient is a minimal Envoy-like SotW ADS client: node on the first
// message, wildcard CDS and LDS, EDS for the clusters that need it, ACKs.
type sotwClient struct {
	*testStream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
}

func dialSotW(t *testing.T, s *Server, token string, node *corev3.Node) *sotwClient {
	t.Helper()
	c := &sotwClient{openTestStream(t, s, token, discoveryv3.AggregatedDiscoveryServiceClient.StreamAggregatedResources)}
	c.send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.ClusterType})
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	return c
}

// collect receives and ACKs until done(state) holds; each response
// replaces its type's state (the state of the world).
func (c *sotwClient) collect(done func(xdsState) bool) xdsState {
	c.t.Helper()
	st := xdsState{}
	var eds []string
	timeout := time.After(10 * time.Second)
	for !done(st) {
		select {
		case r := <-c.resps:
			got := map[string]proto.Message{}
			for _, a := range r.GetResources() {
				m, err := a.UnmarshalNew()
				if err != nil {
					c.t.Fatalf("unmarshal: %v", err)
				}
				got[cachev3.GetResourceName(m)] = m
			}
			st[r.GetTypeUrl()] = got
			ack := &discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}
			if r.GetTypeUrl() == resourcev3.EndpointType {
				ack.ResourceNames = eds
			}
			c.send(ack)
			if r.GetTypeUrl() == resourcev3.ClusterType && eds == nil {
				for name, m := range got {
					if m.(*clusterv3.Cluster).GetType() == clusterv3.Cluster_EDS {
						eds = append(eds, name)
					}
				}
				if eds != nil {
					c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: eds})
				}
			}
		case err := <-c.errc:
			c.t.Fatalf("stream ended: %v", err)
		case <-timeout:
			c.t.Fatalf("timed out; have %v", st.names())
		}
	}
	return st
}

// expectNoResponse fails on any response or error within d.
func (c *sotwClient) expectNoResponse(d time.Duration) {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Errorf("got a %s response", shortType(r.GetTypeUrl()))
	case err := <-c.errc:
		c.t.Errorf("stream ended: %v", err)
	case <-time.After(d):
	}
}

func TestSotWIsServedOnlyIn214Mode(t *testing.T) {
	for _, kuma := range []string{Kuma30, Kuma214} {
		t.Run(kuma, func(t *testing.T) {
			s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: kuma})
			node, tok := egressNode(t, s, "zp-egress-1")
			c := dialSotW(t, s, tok, node)
			if kuma == Kuma30 {
				c.expectUnimplemented()
				if ps := s.Proxies(); len(ps) != 0 {
					t.Errorf("3.0 registered a SotW stream: %+v", ps)
				}
				return
			}
			st := c.collect(and(hasAll(resourcev3.ListenerType, egressLDS), hasAll(resourcev3.ClusterType, "system_envoy_admin")))
			checkListener(t, st, egressLDS, 10002, DestinationSNI("payments", "egress"), "kri_extsvc_payments_default__httpbin_80")
			eventually(t, "the LDS ACK recorded", func() bool {
				ps := s.Proxies()
				return len(ps) == 1 && ps[0].Connected && ps[0].Protocol == ProtocolSotW && contains(ps[0].ACKed, resourcev3.ListenerType)
			})
			if _, ok := s.Dataplane("payments", "zp-egress-1"); !ok {
				t.Error("the SotW stream registered no Dataplane")
			}
		})
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// A node holds one stream whatever its protocol: kuma-cp 2.14.3 runs the
// same DataplaneCallbacks for SotW and delta.
func TestANodeHoldsOneStreamAcrossProtocols(t *testing.T) {
	tests := []struct {
		name      string
		sotwFirst bool
	}{
		{"SotW holds, delta refused", true},
		{"delta holds, SotW refused", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const delay = 500 * time.Millisecond
			s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: Kuma214, DeregistrationDelay: delay})
			node, tok := egressNode(t, s, "zp-egress-1")
			id := node.GetId()
			var closeFirst func()
			if tc.sotwFirst {
				c := dialSotW(t, s, tok, node)
				c.collect(hasAll(resourcev3.ListenerType, egressLDS))
				closeFirst = c.cancel
				dialADS(t, s, tok, node).expectError(codes.Unknown, alreadyActiveText)
			} else {
				c := dialADS(t, s, tok, node)
				c.collect(hasAll(resourcev3.ListenerType, egressLDS))
				closeFirst = c.cancel
				dialSotW(t, s, tok, node).expectError(codes.Unknown, alreadyActiveText)
			}
			first := s.NodeStream(id).ActiveStream
			closeFirst()
			eventually(t, "the closed stream deregistering", func() bool { return s.NodeStream(id).DeregisteringSince != nil })
			// Still refused until the deregistration, by the other protocol too.
			if tc.sotwFirst {
				dialSotW(t, s, tok, node).expectError(codes.Unknown, alreadyActiveText)
			} else {
				dialADS(t, s, tok, node).expectError(codes.Unknown, alreadyActiveText)
			}
			eventually(t, "the node released", func() bool { return s.NodeStream(id).ActiveStream == 0 })
			if _, ok := s.Dataplane("payments", "zp-egress-1"); ok {
				t.Error("the Dataplane outlived its deregistration")
			}
			dialSotW(t, s, tok, node).collect(hasAll(resourcev3.ListenerType, egressLDS))
			if ns := s.NodeStream(id); ns.ActiveStream == first || ns.Accepted != 2 || ns.Refusals != 2 {
				t.Errorf("after reconnecting: %+v", ns)
			}
		})
	}
}

func TestSotWAuthenticatesLikeDelta(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: Kuma214})
	node, _ := egressNode(t, s, "zp-egress-1")
	dialSotW(t, s, "garbage", node).expectError(codes.Unknown, "authentication failed: could not parse token. "+tokenHint+": token is malformed: token contains an invalid number of segments")
	if ps := s.Proxies(); len(ps) != 0 {
		t.Errorf("a refused stream registered: %+v", ps)
	}
}

// An ingress over SotW gets its EDS clusters' endpoints once it asks.
func TestSotWServesAnIngressItsEndpoints(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: Kuma214})
	tok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-ingress"})
	node := nodeFor(t, s, dpJSON(t, "payments", "zp-ingress-1", "zp-ingress", ingressListener), nil)
	backend := serviceCluster("payments", "backend")
	st := dialSotW(t, s, tok, node).collect(and(hasAll(resourcev3.ListenerType, ingressLDS), hasAll(resourcev3.EndpointType, backend)))
	checkListener(t, st, ingressLDS, 10001, DestinationSNI("payments", "ingress"), backend)
}
