package controlplane

import (
	"context"
	"crypto/tls"
	"sort"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// deltaClient is a minimal Envoy-like delta ADS client: node on the first
// message, wildcard CDS and LDS, EDS for the clusters that need it, ACKs.
type deltaClient struct {
	*testStream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
}

func dialADS(t *testing.T, s *Server, token string, node *corev3.Node) *deltaClient {
	t.Helper()
	c := &deltaClient{openTestStream(t, s, token, discoveryv3.AggregatedDiscoveryServiceClient.DeltaAggregatedResources)}
	c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resourcev3.ClusterType})
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	return c
}

// testStream is one ADS stream of a test client, SotW or delta: what it
// received, then how it ended.
type testStream[Req, Resp any] struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[Req, Resp]
	cancel context.CancelFunc
	resps  chan *Resp
	errc   chan error
}

// openTestStream opens a stream with open on a new connection; token,
// when set, is its authorization metadata.
func openTestStream[Req, Resp any](t *testing.T, s *Server, token string,
	open func(discoveryv3.AggregatedDiscoveryServiceClient, context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error),
) *testStream[Req, Resp] {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: caPool(t, s), MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", token)
	}
	stream, err := open(discoveryv3.NewAggregatedDiscoveryServiceClient(conn), ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testStream[Req, Resp]{t: t, stream: stream, cancel: cancel, resps: make(chan *Resp, 16), errc: make(chan error, 1)}
	go pump(stream.Recv, ts.resps, ts.errc)
	return ts
}

// pump passes a stream's responses on until it ends, then its error.
func pump[R any](recv func() (R, error), resps chan<- R, errc chan<- error) {
	for {
		r, err := recv()
		if err != nil {
			errc <- err
			return
		}
		resps <- r
	}
}

// dialProxy connects the zone proxy payments/name of workload with these
// listeners, with a token for the workload.
func dialProxy(t *testing.T, s *Server, workload, name string, ls ...listener) *deltaClient {
	t.Helper()
	tok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: workload})
	return dialADS(t, s, tok, nodeFor(t, s, dpJSON(t, "payments", name, workload, ls...), nil))
}

func (c *testStream[Req, Resp]) send(r *Req) {
	c.t.Helper()
	if err := c.stream.Send(r); err != nil {
		c.t.Logf("send: %v", err)
	}
}

// xdsState is what the client received, by type then name.
type xdsState map[string]map[string]proto.Message

// collect receives and ACKs until done(state) holds, subscribing to EDS
// for the EDS clusters it gets.
func (c *deltaClient) collect(done func(xdsState) bool) xdsState {
	c.t.Helper()
	st := xdsState{}
	edsSubscribed := map[string]bool{}
	c.receive(st, done, func(*discoveryv3.DeltaDiscoveryResponse) {
		var eds []string
		for name, m := range st[resourcev3.ClusterType] {
			if m.(*clusterv3.Cluster).GetType() == clusterv3.Cluster_EDS && !edsSubscribed[name] {
				edsSubscribed[name] = true
				eds = append(eds, name)
			}
		}
		if len(eds) > 0 {
			c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: eds})
		}
	})
	return st
}

// receive adds each response's resources to st and ACKs it, then calls
// after with it, until done(st) holds.
func (c *deltaClient) receive(st xdsState, done func(xdsState) bool, after func(*discoveryv3.DeltaDiscoveryResponse)) {
	c.t.Helper()
	timeout := time.After(10 * time.Second)
	for !done(st) {
		select {
		case r := <-c.resps:
			if st[r.GetTypeUrl()] == nil {
				st[r.GetTypeUrl()] = map[string]proto.Message{}
			}
			for _, res := range r.GetResources() {
				m, err := res.GetResource().UnmarshalNew()
				if err != nil {
					c.t.Fatalf("unmarshal %s: %v", res.GetName(), err)
				}
				if err := m.(validator).ValidateAll(); err != nil {
					c.t.Errorf("%s %s is invalid: %v", r.GetTypeUrl(), res.GetName(), err)
				}
				st[r.GetTypeUrl()][res.GetName()] = m
			}
			c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
			after(r)
		case err := <-c.errc:
			c.t.Fatalf("stream ended: %v", err)
		case <-timeout:
			c.t.Fatalf("timed out; have %v", st.names())
		}
	}
}

func (st xdsState) names() map[string][]string {
	out := map[string][]string{}
	for typ, m := range st {
		for n := range m {
			out[typ] = append(out[typ], n)
		}
		sort.Strings(out[typ])
	}
	return out
}

// expectError waits for the stream to end and checks its status.
// expectError waits for the stream to end with code and msg, failing on
// a response.
func (c *testStream[Req, Resp]) expectError(code codes.Code, msg string) {
	c.t.Helper()
	select {
	case err := <-c.errc:
		st, _ := status.FromError(err)
		if st.Code() != code || st.Message() != msg {
			c.t.Errorf("stream ended with %v %q\nwant %v %q", st.Code(), st.Message(), code, msg)
		}
	case <-c.resps:
		c.t.Fatalf("got a response instead of an error")
	case <-time.After(10 * time.Second):
		c.t.Fatalf("stream did not end")
	}
}

// nodeFor bootstraps a Dataplane and returns the node Envoy would send,
// exactly as the bootstrap describes it.
func nodeFor(t *testing.T, s *Server, resource string, edit func(map[string]any)) *corev3.Node {
	t.Helper()
	dp, err := parseDataplane([]byte(resource))
	if err != nil {
		t.Fatal(err)
	}
	body := bootstrapBody(dp.Mesh, dp.Name, "unused", resource)
	if edit != nil {
		edit(body)
	}
	return fetchBootstrap(t, s, "", body).GetNode()
}

func hasAll(typ string, names ...string) func(xdsState) bool {
	return func(st xdsState) bool {
		for _, n := range names {
			if _, ok := st[typ][n]; !ok {
				return false
			}
		}
		return true
	}
}

func and(fs ...func(xdsState) bool) func(xdsState) bool {
	return func(st xdsState) bool {
		for _, f := range fs {
			if !f(st) {
				return false
			}
		}
		return true
	}
}

func checkListener(t *testing.T, st xdsState, name string, port uint32, sni, cluster string) {
	t.Helper()
	l := st[resourcev3.ListenerType][name].(*listenerv3.Listener)
	sa := l.GetAddress().GetSocketAddress()
	if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != port {
		t.Errorf("%s address %v", name, sa)
	}
	if lf := l.GetListenerFilters(); len(lf) != 1 || lf[0].GetName() != "envoy.filters.listener.tls_inspector" {
		t.Errorf("%s listener filters %v", name, lf)
	}
	if l.GetStatPrefix() != name {
		t.Errorf("%s stat_prefix %q; kuma-cp uses the listener name", name, l.GetStatPrefix())
	}
	fc := l.GetFilterChains()
	if len(fc) != 1 {
		t.Fatalf("%s filter chains %v", name, fc)
	}
	if m := fc[0].GetFilterChainMatch(); len(m.GetServerNames()) != 1 || m.GetServerNames()[0] != sni || m.GetTransportProtocol() != "tls" {
		t.Errorf("%s match %v", name, m)
	}
	tp := &tcpproxyv3.TcpProxy{}
	if f := fc[0].GetFilters(); len(f) != 1 || f[0].GetName() != "envoy.filters.network.tcp_proxy" || f[0].GetTypedConfig().UnmarshalTo(tp) != nil {
		t.Fatalf("%s filters %v", name, f)
	}
	if tp.GetCluster() != cluster {
		t.Errorf("%s tcp_proxy cluster %q, want %q", name, tp.GetCluster(), cluster)
	}
	if _, ok := st[resourcev3.ClusterType][cluster]; !ok {
		t.Errorf("%s references missing cluster %s", name, cluster)
	}
	if rp := l.GetEnableReusePort(); rp != nil && !rp.GetValue() {
		t.Errorf("%s turns enable_reuse_port off although feature-reuse-port was advertised", name)
	}
}

func TestADSServesZoneProxies(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	const (
		egressCluster  = "kri_extsvc_payments_default__httpbin_80"
		ingressCluster = "kri_msvc_payments_default__backend_http"
	)
	t.Run("egress", func(t *testing.T) {
		c := dialProxy(t, s, "zp-egress", "zp-egress-1", egressListener)
		st := c.collect(and(
			hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"),
			hasAll(resourcev3.ClusterType, egressCluster, "system_envoy_admin", "system_probe_readiness")))
		if n := st.names(); len(n[resourcev3.ListenerType]) != 1 || len(n[resourcev3.ClusterType]) != 3 {
			t.Errorf("resources %v", n)
		}
		checkListener(t, st, "self_zoneegress_dp_ze-port", 10002, "sni.extsvc.payments.default.httpbin.80", egressCluster)
		probe := st[resourcev3.ClusterType]["system_probe_readiness"].(*clusterv3.Cluster)
		if sa := probe.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress(); sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 9902 {
			t.Errorf("readiness cluster %v", sa)
		}
		admin := st[resourcev3.ClusterType]["system_envoy_admin"].(*clusterv3.Cluster)
		if p := admin.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetPipe().GetPath(); p != "/tmp/zp-work/kuma-envoy-admin.sock" {
			t.Errorf("admin cluster pipe %q", p)
		}
		eventually(t, "ACKs of CDS and LDS", func() bool {
			for _, p := range s.Proxies() {
				if p.NodeID == "payments.zp-egress-1" {
					return p.Connected && len(p.ACKed) == 2 && len(p.Listeners) == 1 && p.Listeners[0] == "self_zoneegress_dp_ze-port"
				}
			}
			return false
		})
		c.cancel()
		eventually(t, "disconnect", func() bool {
			for _, p := range s.Proxies() {
				if p.NodeID == "payments.zp-egress-1" {
					return !p.Connected && !p.ConnectedAt.IsZero()
				}
			}
			return false
		})
	})
	t.Run("ingress", func(t *testing.T) {
		c := dialProxy(t, s, "zp-ingress", "zp-ingress-1", ingressListener)
		st := c.collect(and(
			hasAll(resourcev3.ListenerType, "self_zoneingress_dp_zi-port"),
			hasAll(resourcev3.ClusterType, ingressCluster, "system_envoy_admin", "system_probe_readiness"),
			hasAll(resourcev3.EndpointType, ingressCluster)))
		checkListener(t, st, "self_zoneingress_dp_zi-port", 10001, "sni.msvc.payments.default.backend.http", ingressCluster)
		cla := st[resourcev3.EndpointType][ingressCluster].(*endpointv3.ClusterLoadAssignment)
		if len(cla.GetEndpoints()) != 1 {
			t.Errorf("CLA %v", cla)
		}
		eventually(t, "ACK of EDS", func() bool {
			for _, p := range s.Proxies() {
				if p.NodeID == "payments.zp-ingress-1" {
					return len(p.ACKed) == 3
				}
			}
			return false
		})
	})
	t.Run("combined, unnamed listener, no reuse-port feature", func(t *testing.T) {
		tok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Name: "zp-combined-1"})
		unnamed := listener{Type: "ZoneIngress", Address: "127.0.0.1", Port: 10003}
		node := nodeFor(t, s, dpJSON(t, "payments", "zp-combined-1", "zp-combined", egressListener, unnamed), func(m map[string]any) {
			m["features"] = []string{}
		})
		c := dialADS(t, s, tok, node)
		st := c.collect(and(
			hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port", "self_zoneingress_dp_10003"),
			hasAll(resourcev3.ClusterType, egressCluster, ingressCluster, "system_envoy_admin", "system_probe_readiness"),
			hasAll(resourcev3.EndpointType, ingressCluster)))
		for _, l := range st[resourcev3.ListenerType] {
			if v := l.(*listenerv3.Listener).GetEnableReusePort(); v == nil || v.GetValue() {
				t.Errorf("enable_reuse_port %v without feature-reuse-port", v)
			}
		}
	})
}

func TestADSAuthDisabled(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, AuthDisabled: true})
	node := nodeFor(t, s, dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener), nil)
	c := dialADS(t, s, "", node)
	c.collect(hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"))
}

func TestADSRejections(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	egress := dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener)
	node := nodeFor(t, s, egress, nil)
	good, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-egress"})
	tokenFor := func(r TokenRequest) string {
		tok, err := s.IssueToken(r)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	withMeta := func(key, value string) *corev3.Node {
		n := proto.Clone(node).(*corev3.Node)
		if value == "" {
			delete(n.GetMetadata().GetFields(), key)
		} else {
			n.GetMetadata().GetFields()[key] = structpb.NewStringValue(value)
		}
		return n
	}
	parse := "authentication failed: could not parse token. " + tokenHint + ": "
	rows := []struct {
		name  string
		token string
		node  *corev3.Node
		want  string
	}{
		{"garbage token", "garbage", node, parse + "token is malformed: token contains an invalid number of segments"},
		{"no token", "", node, parse + "token is malformed: token contains an invalid number of segments"},
		{"wrong workload", tokenFor(TokenRequest{Mesh: "payments", Workload: "zp-ingress"}), node,
			`authentication failed: dataplane workload "zp-egress" is not allowed with this token. Allowed workload in token is "zp-ingress"`},
		{"wrong mesh", tokenFor(TokenRequest{Mesh: "billing"}), node,
			"authentication failed: proxy mesh from requestor: payments is different than in token: billing"},
		{"wrong name", tokenFor(TokenRequest{Mesh: "payments", Name: "other"}), node,
			"authentication failed: proxy name from requestor: zp-egress-1 is different than in token: other"},
		{"legacy proxy type", good, withMeta("dataplane.proxyType", "ingress"), `unsupported proxy type "ingress", only "dataplane" is supported`},
		{"node id does not match the resource", good, func() *corev3.Node { n := proto.Clone(node).(*corev3.Node); n.Id = "payments.other"; return n }(),
			"proxyId payments.other does not match proxy resource payments.zp-egress-1"},
		{"no resource in metadata", good, withMeta("dataplane.resource", ""),
			`resource "payments.zp-egress-1" not found; create a Dataplane in Kuma CP first or pass it as an argument to kuma-dp`},
		{"no node", good, nil, "request must have a valid Proxy ID"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			dialADS(t, s, r.token, r.node).expectError(codes.Unknown, r.want)
		})
	}

	t.Run("second stream for the same node", func(t *testing.T) {
		first := dialADS(t, s, good, node)
		first.collect(hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"))
		dialADS(t, s, good, node).expectError(codes.Unknown, alreadyActiveText)
		first.cancel()
		// The node stays active while the first stream deregisters.
		eventually(t, "first stream released", func() bool {
			return s.NodeStream(node.GetId()).ActiveStream == 0
		})
		dialADS(t, s, good, node).collect(hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"))
	})

	t.Run("RejectADSAuth fault", func(t *testing.T) {
		s.SetFaults(Faults{RejectADSAuth: true})
		defer s.SetFaults(Faults{})
		dialADS(t, s, good, node).expectError(codes.Unknown, parse+"token signature is invalid: crypto/rsa: verification error")
	})
}

// syncBuffer is a goroutine-safe log sink for asserting log lines.
type syncBuffer = testutil.SyncBuffer

func TestADSWithoutReadinessPortServesNothing(t *testing.T) {
	logs := &syncBuffer{}
	s := startTestServer(t, Options{Meshes: []string{"payments"}, AuthDisabled: true, Log: logs})
	node := nodeFor(t, s, dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener), func(m map[string]any) {
		delete(m, "readinessPort")
	})
	c := dialADS(t, s, "", node)
	eventually(t, "the readiness port error in the log", func() bool {
		return strings.Contains(logs.String(), "ReadinessPort has to be in (0, 65535] range")
	})
	// The stream stays open and nothing was sent.
	select {
	case r := <-c.resps:
		t.Fatalf("got %s without a readiness port", r.GetTypeUrl())
	case err := <-c.errc:
		t.Fatalf("stream ended: %v", err)
	default:
	}
	if strings.Contains(logs.String(), "ads: sent") {
		t.Errorf("something was sent:\n%s", logs)
	}
	ps := s.Proxies()
	if len(ps) != 1 || !ps[0].Connected || len(ps[0].Listeners) != 0 {
		t.Errorf("proxies %+v", ps)
	}
}

func TestADSNeverLogsTokens(t *testing.T) {
	logs := &syncBuffer{}
	s := startTestServer(t, Options{Meshes: []string{"payments"}, Log: logs})
	tok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-ingress"})
	egress := dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener)
	body := bootstrapBody("payments", "zp-egress-1", tok, egress)
	fetchBootstrap(t, s, "", body)
	body["proxyType"] = "ingress" // a 500, which kuma-cp logs with the token
	post(t, httpClient(t, s, true), s.URL()+"/bootstrap", mustJSON(t, body), "application/json")
	dialADS(t, s, tok, fetchBootstrap(t, s, "", bootstrapBody("payments", "zp-egress-1", tok, egress)).GetNode()).
		expectError(codes.Unknown, `authentication failed: dataplane workload "zp-egress" is not allowed with this token. Allowed workload in token is "zp-ingress"`)
	sig := tok[strings.LastIndex(tok, ".")+1:]
	if strings.Contains(logs.String(), sig) {
		t.Errorf("a token was logged:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "not allowed with this token") {
		t.Errorf("rejection not logged:\n%s", logs)
	}
}

func TestHDSAuthenticates(t *testing.T) {
	logs := &syncBuffer{}
	s := startTestServer(t, Options{Meshes: []string{"payments"}, Log: logs})
	node := nodeFor(t, s, dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener), nil)
	good, _ := s.IssueToken(TokenRequest{Mesh: "payments"})
	open := func(token string) grpc.BidiStreamingClient[healthv3.HealthCheckRequestOrEndpointHealthResponse, healthv3.HealthCheckSpecifier] {
		conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: caPool(t, s)})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", token))
		t.Cleanup(cancel)
		stream, err := healthv3.NewHealthDiscoveryServiceClient(conn).StreamHealthCheck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&healthv3.HealthCheckRequestOrEndpointHealthResponse{RequestType: &healthv3.HealthCheckRequestOrEndpointHealthResponse_HealthCheckRequest{
			HealthCheckRequest: &healthv3.HealthCheckRequest{Node: node},
		}}); err != nil {
			t.Fatal(err)
		}
		return stream
	}
	_, err := open("garbage").Recv()
	if st, _ := status.FromError(err); st.Code() != codes.Unknown || !strings.HasPrefix(st.Message(), "authentication failed: could not parse token.") {
		t.Errorf("garbage token on HDS: %v", err)
	}
	open(good)
	eventually(t, "HDS stream accepted", func() bool {
		return strings.Contains(logs.String(), "hds: stream opened node=payments.zp-egress-1")
	})
}
