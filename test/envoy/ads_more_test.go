package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
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
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

func edsCluster(name string, fetchTimeout time.Duration) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
			InitialFetchTimeout:   durationpb.New(fetchTimeout),
		}},
	}
}

func loadAssignment(name string) *endpointv3.ClusterLoadAssignment {
	return staticCluster(name).GetLoadAssignment()
}

func TestADSEDSClusterWarmsBeforeLDS(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	lport := freePort(t)
	snap, err := cachev3.NewSnapshot("v1", map[resource.Type][]types.Resource{
		resource.ClusterType:  {edsCluster("backend", 0)},
		resource.EndpointType: {loadAssignment("backend")},
		resource.ListenerType: {tcpProxyListener(t, "zp-listener", lport, "backend")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), "payments.zp-egress-1", snap); err != nil {
		t.Fatal(err)
	}
	_, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	waitFor(t, 5*time.Second, "EDS ACK", func() bool { return cp.ackCount(resource.EndpointType) >= 1 })
	_, dump := adminDo(t, sock, "GET", "/config_dump?include_eds")
	if !strings.Contains(dump, "envoy.admin.v3.EndpointsConfigDump") || !strings.Contains(dump, "\"dynamic_endpoint_configs\"") {
		t.Fatalf("config_dump?include_eds: %s", dump)
	}
	_, res := adminDo(t, sock, "GET", "/config_dump?resource=dynamic_active_clusters")
	if !strings.Contains(res, "type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster") {
		t.Fatalf("resource=dynamic_active_clusters: %s", res)
	}
}

func TestADSEDSInitialFetchTimeout(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	// No ClusterLoadAssignment is ever served for this cluster.
	cp.setSnapshot(t, "v1", []types.Resource{edsCluster("backend", 700*time.Millisecond)}, nil)
	_, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 5*time.Second, "CDS ACK", func() bool { return cp.ackCount(resource.ClusterType) >= 1 })
	if body := readyBody(sock); body != "PRE_INITIALIZING\n" {
		t.Fatalf("/ready while the EDS cluster warms = %q", body)
	}
	waitFor(t, 5*time.Second, "init to pass the EDS initial fetch timeout", func() bool {
		return readyBody(sock) != "PRE_INITIALIZING\n"
	})
}

func TestADSListenerRemovedAndDrained(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	l1, l2 := freePort(t), freePort(t)
	clusters := []types.Resource{staticCluster("backend")}
	cp.setSnapshot(t, "v1", clusters, []types.Resource{tcpProxyListener(t, "a", l1, "backend"), tcpProxyListener(t, "b", l2, "backend")})
	proc, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	held := holdConn(t, sock, l2)

	cp.setSnapshot(t, "v2", clusters, []types.Resource{tcpProxyListener(t, "a", l1, "backend")})
	waitFor(t, 5*time.Second, "removed listener closed", func() bool { return !dialable(l2) })
	// The log line may follow the close by a moment.
	waitFor(t, 5*time.Second, "the removal log", func() bool { return strings.Contains(proc.stderr.String(), "lds: remove listener 'b'") })
	// Connections of a removed listener are closed after --drain-time-s (1 s).
	held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("held connection not closed by the drain: %v", err)
	}

	if code, body := adminDo(t, sock, "POST", "/drain_listeners?skip_exit"); code != 400 || body != "skip_exit requires graceful\n" {
		t.Fatalf("skip_exit alone: %d %q", code, body)
	}
	start := time.Now()
	adminDo(t, sock, "POST", "/drain_listeners?graceful&inboundonly")
	// Inconclusive if this machine stalled past the drain time meanwhile.
	if !dialable(l1) && time.Since(start) < 900*time.Millisecond {
		t.Fatal("graceful drain closed the listener at once")
	}
	waitFor(t, 5*time.Second, "listener closed after the drain time", func() bool { return !dialable(l1) })
	if time.Since(start) < 900*time.Millisecond {
		t.Fatalf("closed after %s, before --drain-time-s", time.Since(start))
	}
}

func TestADSUnknownTypeInListenerIsNACKed(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	bad := tcpProxyListener(t, "bad", freePort(t), "backend")
	bad.FilterChains[0].Filters = []*listenerv3.Filter{{
		Name:       "envoy.filters.network.nope",
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/nope.v3.Nope"}},
	}}
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{bad})
	_, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 10*time.Second, "NACK", func() bool {
		return cp.nackSeen("bad: Didn't find a registered implementation for 'envoy.filters.network.nope' with type URL: 'nope.v3.Nope'")
	})
	_, dump := adminDo(t, sock, "GET", "/config_dump")
	if !strings.Contains(dump, "\"error_state\"") {
		t.Fatalf("config_dump lacks the listener error_state: %s", dump)
	}
}

// sotwCP serves state-of-the-world ADS and records ACKs and NACKs.
type sotwCP struct {
	mu    sync.Mutex
	acks  map[string]string // type -> last ACKed version
	nacks []string
}

func TestADSStateOfTheWorld(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, quietLog{})
	rec := &sotwCP{acks: map[string]string{}}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, req *discoverygrpc.DiscoveryRequest) error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if req.GetResponseNonce() != "" && req.GetErrorDetail() == nil {
			rec.acks[req.GetTypeUrl()] = req.GetVersionInfo()
		}
		if req.GetErrorDetail() != nil {
			rec.nacks = append(rec.nacks, req.GetErrorDetail().GetMessage())
		}
		return nil
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.serverCert}})))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(context.Background(), cache, cb))
	go gs.Serve(ln)
	defer gs.Stop()

	lport := freePort(t)
	snap, _ := cachev3.NewSnapshot("v1", map[resource.Type][]types.Resource{
		resource.ClusterType:  {staticCluster("backend")},
		resource.ListenerType: {tcpProxyListener(t, "zp-listener", lport, "backend")},
	})
	cache.SetSnapshot(context.Background(), "payments.zp-egress-1", snap)

	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{
		APIType: "GRPC", Port: ln.Addr().(*net.TCPAddr).Port, CA: base64.StdEncoding.EncodeToString(p.caPEM), Token: testToken,
	})
	sock := filepath.Join(dir, "kuma-envoy-admin.sock")
	startEnvoy(t, nil, standardArgs(path)...)
	waitFor(t, 10*time.Second, "/ready LIVE over SotW", func() bool { return readyBody(sock) == "LIVE\n" })
	acked := func(typ, v string) bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.acks[typ] == v
	}
	waitFor(t, 5*time.Second, "CDS and LDS v1 ACKs", func() bool {
		return acked(resource.ClusterType, "v1") && acked(resource.ListenerType, "v1")
	})
	// A listener removed from the SotW set is removed here too.
	snap2, _ := cachev3.NewSnapshot("v2", map[resource.Type][]types.Resource{resource.ClusterType: {staticCluster("backend")}, resource.ListenerType: {}})
	cache.SetSnapshot(context.Background(), "payments.zp-egress-1", snap2)
	waitFor(t, 5*time.Second, "LDS v2 ACK", func() bool { return acked(resource.ListenerType, "v2") })
	waitFor(t, 5*time.Second, "listener closed", func() bool { return !dialable(lport) })
}

func TestPrometheusTags(t *testing.T) {
	st := newStatStore()
	st.gauge("listener.127.0.0.1_8080.downstream_cx_active").set(2)
	st.gauge("listener.127.0.0.1_8080.worker_1.downstream_cx_active").set(2)
	st.gauge("listener.self_zoneegress_dp_ze.downstream_cx_active").set(1)
	st.gauge("listener.admin.downstream_cx_active").set(1)
	st.gauge("listener.admin.main_thread.downstream_cx_active").set(1)
	st.counter("cluster.backend.upstream_cx_total").add(3)
	out := st.renderPrometheus(&statsQuery{})
	for _, want := range []string{
		"# TYPE envoy_listener_downstream_cx_active gauge\n",
		`envoy_listener_downstream_cx_active{envoy_listener_address="127.0.0.1_8080"} 2`,
		`envoy_listener_worker_downstream_cx_active{envoy_worker_id="1",envoy_listener_address="127.0.0.1_8080"} 2`,
		`envoy_listener_downstream_cx_active{envoy_listener_address="self_zoneegress_dp_ze"} 1`,
		"envoy_listener_admin_downstream_cx_active 1",
		"envoy_listener_admin_main_thread_downstream_cx_active 1",
		"# TYPE envoy_cluster_upstream_cx_total counter\n",
		`envoy_cluster_upstream_cx_total{envoy_cluster_name="backend"} 3`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestHDSReportsEndpointHealth(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	downPort := freePort(t)
	ep := func(port int) *endpointv3.Endpoint {
		return &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}}}
	}
	hds := &hdsServer{
		got: make(chan *healthv3.HealthCheckRequestOrEndpointHealthResponse, 16),
		md:  make(chan metadata.MD, 1),
		spec: &healthv3.HealthCheckSpecifier{
			Interval: durationpb.New(200 * time.Millisecond),
			ClusterHealthChecks: []*healthv3.ClusterHealthCheck{{
				ClusterName: "app",
				HealthChecks: []*corev3.HealthCheck{{
					Timeout: durationpb.New(time.Second), Interval: durationpb.New(time.Second),
					HealthChecker: &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
				}},
				LocalityEndpoints: []*healthv3.LocalityEndpoints{{Endpoints: []*endpointv3.Endpoint{ep(up.Addr().(*net.TCPAddr).Port), ep(downPort)}}},
			}},
		},
	}
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCPWithHDS(t, p, "127.0.0.1:0", hds)
	cp.setSnapshot(t, "v1", nil, nil)
	startWithCP(t, cp, "127.0.0.1")

	first := <-hds.got
	req := first.GetHealthCheckRequest()
	if req.GetNode().GetId() != "payments.zp-egress-1" || len(req.GetCapability().GetHealthCheckProtocols()) == 0 {
		t.Fatalf("first HDS message %v", first)
	}
	if md := <-hds.md; len(md.Get("authorization")) != 1 || md.Get("authorization")[0] != testToken {
		t.Fatalf("HDS metadata %v", md)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-hds.got:
			r := m.GetEndpointHealthResponse()
			if r == nil {
				continue
			}
			eh := r.GetClusterEndpointsHealth()[0].GetLocalityEndpointsHealth()[0].GetEndpointsHealth()
			if eh[0].GetHealthStatus() != corev3.HealthStatus_HEALTHY || eh[1].GetHealthStatus() != corev3.HealthStatus_UNHEALTHY {
				t.Fatalf("health %v", eh)
			}
			return
		case <-deadline:
			t.Fatal("no endpoint health response")
		}
	}
}

// An egress-like listener terminating TLS with SDS secrets over ADS: init
// waits for the secrets (INITIALIZING), then goes LIVE.
func TestADSListenerWaitsForSDSSecrets(t *testing.T) {
	p := newPKI(t, []string{"backend.mesh"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	lport := freePort(t)
	ads := &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
		InitialFetchTimeout:   durationpb.New(0),
	}
	dtc, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "kri_mid_payments_default__identity_", SdsConfig: ads}},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
			ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "system_trust_bundle", SdsConfig: ads},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l := tcpProxyListener(t, "self_zoneegress_dp_ze-port", lport, "backend")
	l.FilterChains[0].TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: dtc}}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(p.serverCert.PrivateKey)
	secrets := []types.Resource{
		&tlsv3.Secret{Name: "kri_mid_payments_default__identity_", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.serverCert.Certificate[0]})}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}},
		}}},
		&tlsv3.Secret{Name: "system_trust_bundle", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: p.caPEM}},
		}}},
	}
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{l})
	_, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 10*time.Second, "LDS ACK", func() bool { return cp.ackCount(resource.ListenerType) >= 1 })
	if body := readyBody(sock); body != "INITIALIZING\n" {
		t.Fatalf("/ready while the listener waits for SDS = %q", body)
	}
	_, dump := adminDo(t, sock, "GET", "/config_dump?resource=dynamic_warming_secrets")
	if !strings.Contains(dump, "system_trust_bundle") {
		t.Fatalf("warming secrets: %s", dump)
	}

	snap, err := cachev3.NewSnapshot("v2", map[resource.Type][]types.Resource{
		resource.ClusterType:  {staticCluster("backend")},
		resource.ListenerType: {l},
		resource.SecretType:   secrets,
	})
	if err != nil {
		t.Fatal(err)
	}
	cp.cache.SetSnapshot(context.Background(), "payments.zp-egress-1", snap)
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	// LIVE is decided before the ACK goes out, so wait for it.
	waitFor(t, 5*time.Second, "SDS ACK", func() bool { return cp.ackCount(resource.SecretType) >= 1 })
	_, dump = adminDo(t, sock, "GET", "/config_dump?resource=dynamic_active_secrets")
	if !strings.Contains(dump, "[redacted]") && !strings.Contains(dump, base64.StdEncoding.EncodeToString([]byte("[redacted]"))) {
		t.Fatalf("dynamic secret key not redacted: %s", dump)
	}
}
