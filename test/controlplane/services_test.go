package controlplane

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

func TestServiceNamesAndSNIs(t *testing.T) {
	if ServiceName(0) != "backend" || ServiceName(1) != "svc-00001" || ServiceName(12345) != "svc-12345" {
		t.Errorf("names %q %q %q", ServiceName(0), ServiceName(1), ServiceName(12345))
	}
	if ServiceSNI("payments", "backend") != DestinationSNI("payments", "ingress") {
		t.Errorf("ServiceSNI of backend %q, DestinationSNI %q", ServiceSNI("payments", "backend"), DestinationSNI("payments", "ingress"))
	}
	if _, err := Start(Options{Dir: t.TempDir(), Services: -1}); err == nil {
		t.Error("Start accepted Services -1")
	}
}

// TestAnIngressCarriesManyServices: with Options.Services an ingress gets
// a cluster, a ClusterLoadAssignment and a filter chain per service, the
// backend's first and as without the option; an egress is unchanged.
func TestAnIngressCarriesManyServices(t *testing.T) {
	const n = 50
	s := startTestServer(t, Options{Meshes: []string{"payments"}, Services: n})
	var clusters, cla []string
	for i := 0; i < n; i++ {
		clusters = append(clusters, serviceCluster("payments", ServiceName(i)))
	}
	cla = clusters
	clusters = append(clusters, "system_envoy_admin", "system_probe_readiness")

	c := dialProxy(t, s, "zp-ingress", "zp-ingress-1", ingressListener)
	st := c.collect(and(
		hasAll(resourcev3.ListenerType, "self_zoneingress_dp_zi-port"),
		hasAll(resourcev3.ClusterType, clusters...),
		hasAll(resourcev3.EndpointType, cla...)))
	if names := st.names(); len(names[resourcev3.ClusterType]) != n+2 || len(names[resourcev3.EndpointType]) != n {
		t.Errorf("%d clusters, %d CLAs; want %d and %d", len(names[resourcev3.ClusterType]), len(names[resourcev3.EndpointType]), n+2, n)
	}
	l := st[resourcev3.ListenerType]["self_zoneingress_dp_zi-port"].(*listenerv3.Listener)
	chains := l.GetFilterChains()
	if len(chains) != n {
		t.Fatalf("%d filter chains, want %d", len(chains), n)
	}
	// The backend's chain is the default one, unchanged.
	want := &listenerv3.FilterChain{
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{DestinationSNI("payments", "ingress")}, TransportProtocol: "tls"},
		Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(&tcpproxyv3.TcpProxy{
			StatPrefix: serviceCluster("payments", "backend"), ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: serviceCluster("payments", "backend")},
		})}}},
	}
	if !proto.Equal(chains[0], want) {
		t.Errorf("backend chain %v", chains[0])
	}
	seen := map[string]bool{}
	for i, fc := range chains {
		name := ServiceName(i)
		m := fc.GetFilterChainMatch()
		if len(m.GetServerNames()) != 1 || m.GetServerNames()[0] != ServiceSNI("payments", name) || m.GetTransportProtocol() != "tls" {
			t.Errorf("chain %d match %v", i, m)
		}
		if seen[m.GetServerNames()[0]] {
			t.Errorf("chain %d repeats SNI %s", i, m.GetServerNames()[0])
		}
		seen[m.GetServerNames()[0]] = true
		tp := &tcpproxyv3.TcpProxy{}
		if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(tp); err != nil || tp.GetCluster() != serviceCluster("payments", name) {
			t.Errorf("chain %d tcp_proxy %v %v", i, tp, err)
		}
		if cl := st[resourcev3.ClusterType][tp.GetCluster()].(*clusterv3.Cluster); cl.GetType() != clusterv3.Cluster_EDS {
			t.Errorf("cluster %s type %v", cl.GetName(), cl.GetType())
		}
		eps := st[resourcev3.EndpointType][tp.GetCluster()].(*endpointv3.ClusterLoadAssignment).GetEndpoints()
		wantEndpoints := EndpointsPerService
		if i == 0 {
			wantEndpoints = 1
		}
		if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != wantEndpoints {
			t.Errorf("%s endpoints %v", tp.GetCluster(), eps)
		}
	}

	// An egress of the same control plane gets what it always got.
	e := dialProxy(t, s, "zp-egress", "zp-egress-1", egressListener)
	est := e.collect(and(hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"),
		hasAll(resourcev3.ClusterType, "kri_extsvc_payments_default__httpbin_80", "system_envoy_admin", "system_probe_readiness")))
	if names := est.names(); len(names[resourcev3.ClusterType]) != 3 || len(names[resourcev3.EndpointType]) != 0 {
		t.Errorf("egress resources %v", names)
	}
	if fc := est[resourcev3.ListenerType]["self_zoneegress_dp_ze-port"].(*listenerv3.Listener).GetFilterChains(); len(fc) != 1 {
		t.Errorf("egress has %d filter chains", len(fc))
	}
}

// TestManyServicesThroughTheStandIn runs the Envoy stand-in, as strict as
// Envoy on what it accepts, on an ingress of 1,000 services: every type is
// ACKed, nothing NACKed, the clusters are active, and a ClientHello naming
// the last service's SNI becomes a connection on the listener.
func TestManyServicesThroughTheStandIn(t *testing.T) {
	const n = 1000
	bin := testutil.StandIn(t)
	var cpLog testutil.SyncBuffer
	s := startTestServer(t, Options{Meshes: []string{"payments"}, Services: n, Log: &cpLog})
	work, err := os.MkdirTemp("", "zpsvc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })

	zonePort := freeTCPPort(t)
	bootstrap := writeZoneProxyBootstrap(t, s, work, "payments", "zp-ingress-1", "zp-ingress", listener{Type: "ZoneIngress", Address: "127.0.0.1", Port: int(zonePort), Name: "zi-port"})
	var stderr testutil.SyncBuffer
	cmd := exec.Command(bin, "--config-path", bootstrap, "--drain-time-s", "1", "--log-level", "info")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("stand-in stderr:\n%s", stderr.String())
		}
	})

	await(t, 30*time.Second, "CDS, EDS and LDS ACKed", func() bool {
		return acked(s, "payments.zp-ingress-1", resourcev3.ClusterType) && acked(s, "payments.zp-ingress-1", resourcev3.EndpointType) &&
			acked(s, "payments.zp-ingress-1", resourcev3.ListenerType)
	})
	if strings.Contains(cpLog.String(), "NACK") {
		t.Errorf("the stand-in NACKed:\n%s", grepLines(cpLog.String(), "NACK"))
	}
	admin := testutil.UnixHTTP(adminSocketPath(work), 5*time.Second)
	stat := func(name string) int {
		code, _, b, err := httpGet(admin, "http://localhost/stats?filter=^"+strings.ReplaceAll(name, ".", `\.`)+"$", "")
		if err != nil || code != 200 {
			return -1
		}
		_, v, ok := strings.Cut(strings.TrimSpace(b), ": ")
		if !ok {
			return -1
		}
		x, err := strconv.Atoi(v)
		if err != nil {
			return -1
		}
		return x
	}
	if v := stat("cluster_manager.active_clusters"); v < n+2 {
		t.Errorf("active_clusters = %d, want at least %d", v, n+2)
	}

	prefix := "listener.self_zoneingress_dp_zi-port."
	hello := func(sni string) net.Conn {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", zonePort))
		if err != nil {
			t.Fatal(err)
		}
		go tls.Client(conn, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake() // never answered
		return conn
	}
	c := hello(ServiceSNI("payments", ServiceName(n-1)))
	defer c.Close()
	await(t, 10*time.Second, "a connection for the last service", func() bool { return stat(prefix+"downstream_cx_total") == 1 })
	u := hello(ServiceSNI("payments", "unknown"))
	defer u.Close()
	await(t, 10*time.Second, "no chain for an unknown service", func() bool { return stat(prefix+"no_filter_chain_match") == 1 })
	if v := stat(prefix + "downstream_cx_total"); v != 1 {
		t.Errorf("downstream_cx_total = %d after an unknown SNI", v)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// writeZoneProxyBootstrap asks s for the bootstrap of a zone proxy whose Dataplane
// has listener l, and writes it to work/bootstrap.yaml for the stand-in.
func writeZoneProxyBootstrap(t *testing.T, s *Server, work, mesh, name, workload string, l listener) string {
	t.Helper()
	tok, _ := s.IssueToken(TokenRequest{Mesh: mesh, Workload: workload})
	body := bootstrapBody(mesh, name, tok, dpJSON(t, mesh, name, workload, l))
	body["workdir"] = work
	r := post(t, httpClient(t, s, true), s.URL()+"/bootstrap", mustJSON(t, body), "application/json")
	if r.status != 200 {
		t.Fatalf("bootstrap: %d %s", r.status, r.body)
	}
	var resp struct {
		Bootstrap []byte `json:"bootstrap"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatal(err)
	}
	bootstrap := filepath.Join(work, "bootstrap.yaml")
	if err := os.WriteFile(bootstrap, resp.Bootstrap, 0o600); err != nil {
		t.Fatal(err)
	}
	return bootstrap
}
