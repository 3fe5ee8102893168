package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

const testToken = "eyJhbGciOiJSUzI1NiJ9.test.token"

type quietLog struct{}

func (quietLog) Debugf(string, ...any) {}
func (quietLog) Infof(string, ...any)  {}
func (quietLog) Warnf(string, ...any)  {}
func (quietLog) Errorf(string, ...any) {}

// testCP is a delta ADS server over TLS that insists on the token.
type testCP struct {
	t     *testing.T
	pki   *pki
	cache cachev3.SnapshotCache
	addr  string
	grpc  *grpc.Server

	hds   *hdsServer
	token string // accepted token; testToken when empty

	mu      sync.Mutex
	streams int
	nacks   []string
	acks    map[string]int
	nodes   []string
}

func newTestCP(t *testing.T, p *pki, addr string) *testCP {
	t.Helper()
	return newTestCPWithHDS(t, p, addr, nil)
}

func newTestCPWithHDS(t *testing.T, p *pki, addr string, hds *hdsServer) *testCP {
	t.Helper()
	cp := newCP(t, p, "")
	cp.hds = hds
	cp.start(addr)
	return cp
}

// newCP is a test control plane, not yet started, that accepts token
// (testToken when "").
func newCP(t *testing.T, p *pki, token string) *testCP {
	return &testCP{t: t, pki: p, cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, quietLog{}), acks: map[string]int{}, token: token}
}

// hdsServer sends one specifier and forwards what the client sends.
type hdsServer struct {
	healthv3.UnimplementedHealthDiscoveryServiceServer
	spec *healthv3.HealthCheckSpecifier
	got  chan *healthv3.HealthCheckRequestOrEndpointHealthResponse
	md   chan metadata.MD
}

func (h *hdsServer) StreamHealthCheck(stream healthv3.HealthDiscoveryService_StreamHealthCheckServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	select {
	case h.md <- md:
	default:
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h.got <- first
	if err := stream.Send(h.spec); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		select {
		case h.got <- m:
		default:
		}
	}
}

func (cp *testCP) start(addr string) {
	cp.t.Helper()
	var ln net.Listener
	var err error
	// A restarted server may briefly race the old socket's teardown.
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.addr = ln.Addr().String()
	cb := serverv3.CallbackFuncs{
		DeltaStreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
			md, _ := metadata.FromIncomingContext(ctx)
			want := testToken
			if cp.token != "" {
				want = cp.token
			}
			if v := md.Get("authorization"); len(v) != 1 || v[0] != want {
				return status.Error(codes.Unauthenticated, "authentication failed: bad token")
			}
			cp.mu.Lock()
			cp.streams++
			cp.mu.Unlock()
			return nil
		},
		StreamDeltaRequestFunc: func(_ int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			if req.GetNode() != nil {
				cp.nodes = append(cp.nodes, req.GetNode().GetId())
			}
			if req.GetResponseNonce() == "" {
				return nil
			}
			if req.GetErrorDetail() != nil {
				cp.nacks = append(cp.nacks, req.GetErrorDetail().GetMessage())
			} else {
				cp.acks[req.GetTypeUrl()]++
			}
			return nil
		},
	}
	srv := serverv3.NewServer(context.Background(), cp.cache, cb)
	cp.grpc = grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cp.pki.serverCert}})))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(cp.grpc, srv)
	if cp.hds != nil {
		healthv3.RegisterHealthDiscoveryServiceServer(cp.grpc, cp.hds)
	}
	go cp.grpc.Serve(ln)
	cp.t.Cleanup(cp.grpc.Stop)
}

func (cp *testCP) port() int { return cp.addrPort().Port }

func (cp *testCP) addrPort() *net.TCPAddr {
	a, _ := net.ResolveTCPAddr("tcp", cp.addr)
	return a
}

func (cp *testCP) nackSeen(sub string) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, n := range cp.nacks {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

func (cp *testCP) ackCount(typ string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.acks[typ]
}

func (cp *testCP) streamCount() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.streams
}

func tcpProxyListener(t *testing.T, name string, port int, cluster string) *listenerv3.Listener {
	t.Helper()
	tp, err := anypb.New(&tcpproxyv3.TcpProxy{StatPrefix: name, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{
		Name:             name,
		TrafficDirection: corev3.TrafficDirection_INBOUND,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tp}}},
		}},
	}
}

func staticCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 9}}}},
			}}}},
		}}},
	}
}

func (cp *testCP) setSnapshot(t *testing.T, version string, clusters []types.Resource, listeners []types.Resource) {
	t.Helper()
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{
		resource.ClusterType:  clusters,
		resource.ListenerType: listeners,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), "payments.zp-egress-1", snap); err != nil {
		t.Fatal(err)
	}
}

// startWithCP runs the stand-in against cp with the kuma-like bootstrap.
func startWithCP(t *testing.T, cp *testCP, san string) (*proc, string) {
	t.Helper()
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{
		Port:  cp.port(),
		SAN:   san,
		CA:    base64.StdEncoding.EncodeToString(cp.pki.caPEM),
		Token: testToken,
	})
	sock := filepath.Join(dir, "kuma-envoy-admin.sock")
	p := startEnvoy(t, nil, standardArgs(path)...)
	waitFor(t, 5*time.Second, "admin socket", func() bool {
		_, _, err := adminTry(sock, "GET", "/ready")
		return err == nil
	})
	return p, sock
}

// holdConn connects to the listener on port and waits until the stand-in
// counts the connection; it is closed when the test ends.
func holdConn(t *testing.T, sock string, port int) net.Conn {
	t.Helper()
	c := dialPort(t, port)
	waitFor(t, 5*time.Second, "held connection counted", func() bool {
		return statValue(t, sock, fmt.Sprintf("listener.127.0.0.1_%d.downstream_cx_active", port)) == 1
	})
	return c
}

func readyBody(sock string) string {
	_, body, _ := adminTry(sock, "GET", "/ready")
	return body
}

func TestADSConfigAndLive(t *testing.T) {
	p := newPKI(t, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	lport := freePort(t)
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{tcpProxyListener(t, "zp-listener", lport, "backend")})
	proc, sock := startWithCP(t, cp, "127.0.0.1")

	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	// LIVE is decided before the LDS ACK goes out, so wait for it.
	waitFor(t, 5*time.Second, "CDS and LDS ACKs", func() bool {
		return cp.ackCount(resource.ClusterType) >= 1 && cp.ackCount(resource.ListenerType) >= 1
	})
	if v := statValue(t, sock, "control_plane.connected_state"); v != 1 {
		t.Fatalf("connected_state = %d", v)
	}
	if v := statValue(t, sock, "cluster_manager.active_clusters"); v != 3 {
		t.Fatalf("active_clusters = %d (2 static + 1 dynamic)", v)
	}
	if v := statValue(t, sock, "listener_manager.total_listeners_active"); v != 1 {
		t.Fatalf("total_listeners_active = %d", v)
	}
	cp.mu.Lock()
	nodes := append([]string(nil), cp.nodes...)
	cp.mu.Unlock()
	if len(nodes) != 1 || nodes[0] != "payments.zp-egress-1" {
		t.Fatalf("node sent on %d requests %q; want only on the first", len(nodes), nodes)
	}

	// The listener is really bound and counts downstream connections.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", lport))
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("listener.127.0.0.1_%d.", lport)
	waitFor(t, 5*time.Second, "downstream_cx_active 1", func() bool { return statValue(t, sock, prefix+"downstream_cx_active") == 1 })
	if v := statValue(t, sock, prefix+"downstream_cx_total"); v != 1 {
		t.Fatalf("downstream_cx_total = %d", v)
	}
	c.Close()
	waitFor(t, 5*time.Second, "downstream_cx_active 0", func() bool { return statValue(t, sock, prefix+"downstream_cx_active") == 0 })

	_, dump := adminDo(t, sock, "GET", "/config_dump")
	for _, want := range []string{"type.googleapis.com/envoy.admin.v3.BootstrapConfigDump", "\"dynamic_active_clusters\"", "\"zp-listener\"", "\"cp_validation_ctx\""} {
		if !strings.Contains(dump, want) {
			t.Fatalf("config_dump lacks %s", want)
		}
	}

	// Health check failure turns /ready into DRAINING once LIVE.
	adminDo(t, sock, "POST", "/healthcheck/fail")
	if body := readyBody(sock); body != "DRAINING\n" {
		t.Fatalf("/ready = %q", body)
	}
	adminDo(t, sock, "POST", "/healthcheck/ok")

	// A non-graceful drain closes the listener at once.
	if code, body := adminDo(t, sock, "POST", "/drain_listeners"); code != 200 || body != "OK\n" {
		t.Fatalf("drain: %d %q", code, body)
	}
	waitFor(t, 5*time.Second, "listener closed", func() bool { return !dialable(lport) })
	if strings.Contains(proc.stderr.String(), testToken) {
		t.Fatal("token leaked into the log")
	}
}

func TestADSListenerBindConflictNACK(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{tcpProxyListener(t, "busy", port, "backend")})
	proc, sock := startWithCP(t, cp, "127.0.0.1")

	want := fmt.Sprintf("cannot bind '127.0.0.1:%d': Address already in use", port)
	waitFor(t, 10*time.Second, "NACK with the bind error", func() bool { return cp.nackSeen(want) })
	if !cp.nackSeen("Error adding/updating listener(s) busy: ") {
		t.Fatalf("nacks %q", cp.nacks)
	}
	// A rejected first LDS response still completes init, as in Envoy.
	waitFor(t, 5*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	if v := statValue(t, sock, "listener_manager.lds.update_rejected"); v < 1 {
		t.Fatalf("lds.update_rejected = %d", v)
	}
	if !strings.Contains(proc.stderr.String(), "[warning][config]") || !strings.Contains(proc.stderr.String(), want) {
		t.Fatalf("stderr lacks the warning: %s", proc.stderr.String())
	}
}

func TestADSReconnectsAfterServerRestart(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	lport := freePort(t)
	snapCluster := []types.Resource{staticCluster("backend")}
	snapListener := []types.Resource{tcpProxyListener(t, "zp-listener", lport, "backend")}
	cp.setSnapshot(t, "v1", snapCluster, snapListener)
	proc, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })

	addr := cp.addr
	cp.grpc.Stop()
	waitFor(t, 5*time.Second, "connected_state 0", func() bool {
		return statValue(t, sock, "control_plane.connected_state") == 0
	})
	// The stat flips before the warning line is written: await the line.
	waitFor(t, 5*time.Second, "the stream-closed warning", func() bool {
		return strings.Contains(proc.stderr.String(), "DeltaAggregatedResources gRPC config stream to system_ads closed: ")
	})
	// Config received before the outage keeps serving.
	if body := readyBody(sock); body != "LIVE\n" {
		t.Fatalf("/ready during outage = %q", body)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", lport))
	if err != nil {
		t.Fatalf("listener gone during outage: %v", err)
	}
	c.Close()

	cp2 := newTestCP(t, p, addr)
	cp2.setSnapshot(t, "v2", snapCluster, snapListener)
	waitFor(t, 15*time.Second, "connected_state 1 again", func() bool {
		return statValue(t, sock, "control_plane.connected_state") == 1
	})
	waitFor(t, 5*time.Second, "ACK on the new server", func() bool { return cp2.ackCount(resource.ClusterType) >= 1 })
}

func TestADSSANMismatchNeverConnects(t *testing.T) {
	p := newPKI(t, []string{"cp.example"}, nil)
	cp := newTestCP(t, p, "127.0.0.1:0")
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, nil)
	proc, sock := startWithCP(t, cp, "127.0.0.1")
	// Wait for two failed handshakes: the stand-in has tried and retried.
	waitFor(t, 10*time.Second, "two verification failures", func() bool {
		return strings.Count(proc.stderr.String(), "CERTIFICATE_VERIFY_FAILED") >= 2
	})
	if n := cp.streamCount(); n != 0 {
		t.Fatalf("server saw %d streams", n)
	}
	if v := statValue(t, sock, "control_plane.connected_state"); v != 0 {
		t.Fatalf("connected_state = %d", v)
	}
	if body := readyBody(sock); body != "PRE_INITIALIZING\n" {
		t.Fatalf("/ready = %q", body)
	}
}

func TestADSBadTokenIsRejected(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{Port: cp.port(), CA: base64.StdEncoding.EncodeToString(p.caPEM), Token: "wrong"})
	proc := startEnvoy(t, nil, standardArgs(path)...)
	waitFor(t, 10*time.Second, "auth failure logged", func() bool {
		return strings.Contains(proc.stderr.String(), "closed: 16, authentication failed: bad token")
	})
}
