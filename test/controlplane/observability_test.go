package controlplane

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filealv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// sync receives and ACKs, applying additions and removals to st, until
// done(st) holds.
func (c *deltaClient) sync(st xdsState, done func(xdsState) bool) {
	c.t.Helper()
	c.receive(st, done, func(r *discoveryv3.DeltaDiscoveryResponse) {
		for _, n := range r.GetRemovedResources() {
			delete(st[r.GetTypeUrl()], n)
		}
	})
}

func lacks(typ string, names ...string) func(xdsState) bool {
	return func(st xdsState) bool {
		for _, n := range names {
			if _, ok := st[typ][n]; ok {
				return false
			}
		}
		return true
	}
}

// connectCombined connects the combined zone proxy zp-combined-1 (ingress
// zi-port 10001 and egress ze-port 10002) and waits for its listeners.
func connectCombined(t *testing.T, s *Server) (*deltaClient, xdsState) {
	t.Helper()
	c := dialProxy(t, s, "zp-combined", "zp-combined-1", ingressListener, egressListener)
	st := xdsState{}
	c.sync(st, hasAll(resourcev3.ListenerType, "self_zoneingress_dp_zi-port", "self_zoneegress_dp_ze-port"))
	return c, st
}

func tcpProxyOf(t *testing.T, l *listenerv3.Listener) *tcpproxyv3.TcpProxy {
	t.Helper()
	tp := &tcpproxyv3.TcpProxy{}
	if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(tp); err != nil {
		t.Fatal(err)
	}
	return tp
}

func TestMeshAccessLogReachesEveryZoneListener(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	mal := MeshAccessLog{Backends: []AccessLogBackend{
		{Type: "Tcp", TCP: &TCPAccessLogBackend{Address: "127.0.0.1:5000"}},
		{Type: "Tcp", TCP: &TCPAccessLogBackend{Address: "127.0.0.1:5001", Format: &AccessLogFormat{Type: "Json", JSON: []AccessLogJSON{
			{Key: "start", Value: "%START_TIME%"}, {Key: "mesh", Value: "%KUMA_MESH%"}, {Key: "bytes", Value: "%BYTES_RECEIVED%"},
		}}}},
	}}
	// Set before the proxy connects: it arrives with the first snapshot.
	if err := s.SetMeshAccessLog("payments", "zp-combined-1", "zp-logs", mal); err != nil {
		t.Fatal(err)
	}
	c, st := connectCombined(t, s)

	const fifo = "/tmp/zp-work/kuma-al-zp-combined-1-payments.sock"
	wantJSON := []string{
		`{"address":"127.0.0.1:5000","message":"[%START_TIME%] %RESPONSE_FLAGS% payments 127.0.0.1(unknown)->%UPSTREAM_HOST%(unknown) took %DURATION%ms, sent %BYTES_SENT% bytes, received: %BYTES_RECEIVED% bytes\n"}`,
		`{"address":"127.0.0.1:5001","message":{"bytes":"%BYTES_RECEIVED%","mesh":"payments","start":"%START_TIME%"}}`,
	}
	for _, name := range []string{"self_zoneingress_dp_zi-port", "self_zoneegress_dp_ze-port"} {
		tp := tcpProxyOf(t, st[resourcev3.ListenerType][name].(*listenerv3.Listener))
		if !tp.GetAccessLogOptions().GetFlushAccessLogOnConnected() {
			t.Errorf("%s: flush_access_log_on_connected not set", name)
		}
		if len(tp.GetAccessLog()) != 2 {
			t.Fatalf("%s: %d access logs, want 2", name, len(tp.GetAccessLog()))
		}
		for i, al := range tp.GetAccessLog() {
			f := &filealv3.FileAccessLog{}
			if al.GetName() != "envoy.access_loggers.file" || al.GetTypedConfig().UnmarshalTo(f) != nil {
				t.Fatalf("%s: access log %d is %v", name, i, al)
			}
			if f.GetPath() != fifo {
				t.Errorf("%s: path %q, want %q", name, f.GetPath(), fifo)
			}
			got, _ := protojson.MarshalOptions{}.Marshal(f.GetLogFormat().GetJsonFormat())
			if compactJSON(t, got) != wantJSON[i] {
				t.Errorf("%s: json_format\n got %s\nwant %s", name, compactJSON(t, got), wantJSON[i])
			}
		}
	}

	// Removing the policy is pushed: the loggers go away.
	if !s.DeleteMeshAccessLog("payments", "zp-combined-1", "zp-logs") {
		t.Fatal("policy not found")
	}
	c.sync(st, func(st xdsState) bool {
		tp := tcpProxyOf(t, st[resourcev3.ListenerType]["self_zoneegress_dp_ze-port"].(*listenerv3.Listener))
		return len(tp.GetAccessLog()) == 0
	})
}

// compactJSON re-encodes JSON with sorted keys and no HTML escaping
// (protojson's spacing is deliberately unstable).
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// zpMetrics is the §5 MeshMetric default without applications.
func zpMetrics() MeshMetric {
	unused := true
	return MeshMetric{
		Sidecar: &MetricsSidecar{
			IncludeUnused: &unused,
			Profiles: &MetricsProfiles{
				AppendProfiles: &[]MetricsProfile{{Name: "Basic"}},
				Exclude:        &[]MetricsSelector{{Type: "Regex", Match: "^envoy_server_.*"}},
				Include:        &[]MetricsSelector{{Type: "Exact", Match: "envoy_server_live"}},
			},
		},
		Backends: []MetricsBackend{
			{Type: "Prometheus", Prometheus: &PrometheusBackend{Port: 5670, Path: "/metrics"}},
			{Type: "OpenTelemetry", OpenTelemetry: &OpenTelemetryBackend{Name: "otel-collector", Endpoint: OTelEndpoint{Address: "127.0.0.1", Port: 4317}, RefreshInterval: "10s"}},
		},
	}
}

func TestMeshMetricListenersAndDynamicConfig(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	c := dialProxy(t, s, "zp-egress", "zp-egress-1", egressListener)
	st := xdsState{}
	c.sync(st, hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"))

	// Attached while connected: pushed as a new snapshot.
	if err := s.SetMeshMetric("payments", "zp-egress-1", "zp-metrics", zpMetrics()); err != nil {
		t.Fatal(err)
	}
	const (
		prom    = "system_meshmetric_prometheus_default-backend"
		otel    = "system_meshmetric_otel_otel-collector"
		dynconf = "system_dynamicconfig"
	)
	c.sync(st, and(hasAll(resourcev3.ListenerType, prom, otel, dynconf), hasAll(resourcev3.ClusterType, prom, otel)))

	// Prometheus: <networking.address>:5670, reuse port, /metrics rewritten
	// to /meshmetric on the hijacker socket.
	pl := st[resourcev3.ListenerType][prom].(*listenerv3.Listener)
	if sa := pl.GetAddress().GetSocketAddress(); sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 5670 {
		t.Errorf("prometheus listener address %v", sa)
	}
	if !pl.GetEnableReusePort().GetValue() {
		t.Errorf("prometheus listener enable_reuse_port = %v", pl.GetEnableReusePort())
	}
	r := routesOf(t, pl)[0]
	if r.GetMatch().GetPrefix() != "/metrics" || r.GetRoute().GetCluster() != prom || r.GetRoute().GetPrefixRewrite() != "/meshmetric" {
		t.Errorf("prometheus route %v", r)
	}
	if p := pipeOf(st[resourcev3.ClusterType][prom].(*clusterv3.Cluster)); p != "/tmp/zp-work/kuma-mh-zp-egress-1-payments.sock" {
		t.Errorf("prometheus cluster pipe %q", p)
	}
	// OpenTelemetry, direct mode: Envoy listens on the backend's socket.
	if p := st[resourcev3.ListenerType][otel].(*listenerv3.Listener).GetAddress().GetPipe().GetPath(); p != "/tmp/zp-work/kuma-otel-otel-collector.sock" {
		t.Errorf("otel listener pipe %q", p)
	}

	// Dynamic config: 304 on a matching If-None-Match, else 200 + Etag.
	dl := st[resourcev3.ListenerType][dynconf].(*listenerv3.Listener)
	if p := dl.GetAddress().GetPipe().GetPath(); p != "/tmp/zp-work/kuma-mesh-metric-config.sock" {
		t.Errorf("dynconf pipe %q", p)
	}
	wantBody := `{"observability":{"metrics":{"applications":null,"backends":[{"type":"Prometheus","name":null},` +
		`{"type":"OpenTelemetry","name":"otel-collector","openTelemetry":{"endpoint":"/tmp/zp-work/kuma-otel-otel-collector.sock","refreshInterval":"10s"}}],` +
		`"sidecar":{"profiles":{"appendProfiles":[{"name":"Basic"}],"exclude":[{"type":"Regex","match":"^envoy_server_.*"}],"include":[{"type":"Exact","match":"envoy_server_live"}]},"includeUnused":true},` +
		`"extraLabels":{"kuma.proxy_role":"zone-egress","mesh":"payments","zone":"default"}}}}`
	sum := sha256.Sum256([]byte(wantBody))
	etag := hex.EncodeToString(sum[:])
	routes := routesOf(t, dl)
	if len(routes) != 2 {
		t.Fatalf("dynconf routes %v", routes)
	}
	nm, ok := routes[0], routes[1]
	if nm.GetName() != "system_dynamicconfig_meshmetric_not_modified" || nm.GetMatch().GetPath() != "/meshmetric" ||
		nm.GetMatch().GetHeaders()[0].GetName() != "If-None-Match" || nm.GetMatch().GetHeaders()[0].GetStringMatch().GetExact() != etag ||
		nm.GetDirectResponse().GetStatus() != 304 {
		t.Errorf("not-modified route %v", nm)
	}
	if ok.GetName() != "system_dynamicconfig_meshmetric" || ok.GetMatch().GetPath() != "/meshmetric" || ok.GetDirectResponse().GetStatus() != 200 {
		t.Errorf("config route %v", ok)
	}
	if got := ok.GetDirectResponse().GetBody().GetInlineString(); got != wantBody {
		t.Errorf("body\n got %s\nwant %s", got, wantBody)
	}
	if h := ok.GetResponseHeadersToAdd(); len(h) != 1 || h[0].GetHeader().GetKey() != "Etag" || h[0].GetHeader().GetValue() != etag {
		t.Errorf("config route headers %v", h)
	}

	// Removing the policy removes every resource it added.
	s.DeleteMeshMetric("payments", "zp-egress-1", "zp-metrics")
	c.sync(st, and(lacks(resourcev3.ListenerType, prom, otel, dynconf), lacks(resourcev3.ClusterType, prom, otel)))
}

func routesOf(t *testing.T, l *listenerv3.Listener) []*routev3.Route {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	return hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
}

func pipeOf(c *clusterv3.Cluster) string {
	return c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetPipe().GetPath()
}

func TestDynconfRoleAndZoneLabels(t *testing.T) {
	tests := []struct {
		name      string
		listeners []dpListener
		labels    map[string]string
		want      map[string]string
	}{
		{"egress", []dpListener{{Type: listenerZoneEgress}}, nil, map[string]string{"kuma.proxy_role": "zone-egress", "mesh": "m", "zone": "default"}},
		{"ingress in zone east", []dpListener{{Type: listenerZoneIngress}}, map[string]string{"kuma.io/zone": "east"}, map[string]string{"kuma.proxy_role": "zone-ingress", "mesh": "m", "zone": "east"}},
		{"both", []dpListener{{Type: listenerZoneIngress}, {Type: listenerZoneEgress}}, nil, map[string]string{"kuma.proxy_role": "zone-proxy", "mesh": "m", "zone": "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extraLabels(&dataplane{Mesh: "m", Labels: tt.labels, Networking: &dpNetworking{Listeners: tt.listeners}})
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestWithheldZoneListenersAreSentLater(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	if err := s.WithholdZoneListeners("payments", "zp-combined-1", true); err != nil {
		t.Fatal(err)
	}
	c := dialProxy(t, s, "zp-combined", "zp-combined-1", ingressListener, egressListener)
	st := xdsState{}
	ldsAnswered := func(st xdsState) bool { _, ok := st[resourcev3.ListenerType]; return ok }
	c.sync(st, and(ldsAnswered, hasAll(resourcev3.ClusterType, "system_envoy_admin", "system_probe_readiness")))
	eventually(t, "LDS ACKed", func() bool { return acked(s, "payments.zp-combined-1", resourcev3.ListenerType) })
	if n := st.names(); len(n[resourcev3.ListenerType]) != 0 || len(n[resourcev3.ClusterType]) != 2 {
		t.Fatalf("withheld proxy got %v", n)
	}
	if err := s.WithholdZoneListeners("payments", "zp-combined-1", false); err != nil {
		t.Fatal(err)
	}
	c.sync(st, and(hasAll(resourcev3.ListenerType, "self_zoneingress_dp_zi-port", "self_zoneegress_dp_ze-port"),
		hasAll(resourcev3.ClusterType, "kri_extsvc_payments_default__httpbin_80", "kri_msvc_payments_default__backend_http")))
	if err := s.WithholdZoneListeners("payments", "zp-combined-1", true); err != nil {
		t.Fatal(err)
	}
	c.sync(st, lacks(resourcev3.ListenerType, "self_zoneingress_dp_zi-port", "self_zoneegress_dp_ze-port"))
}

func acked(s *Server, nodeID, typ string) bool {
	for _, p := range s.Proxies() {
		if p.NodeID == nodeID {
			for _, a := range p.ACKed {
				if a == typ {
					return true
				}
			}
		}
	}
	return false
}

func TestPolicyValidationNamesTheField(t *testing.T) {
	s := startTestServer(t, Options{})
	tcp := func(addr string, f *AccessLogFormat) MeshAccessLog {
		return MeshAccessLog{Backends: []AccessLogBackend{{Type: "Tcp", TCP: &TCPAccessLogBackend{Address: addr, Format: f}}}}
	}
	prom := func(p PrometheusBackend) MeshMetric {
		return MeshMetric{Backends: []MetricsBackend{{Type: "Prometheus", Prometheus: &p}}}
	}
	tests := []struct {
		name string
		set  func() error
		want string
	}{
		{"no backends", func() error { return s.SetMeshAccessLog("m", "n", "p", MeshAccessLog{}) }, "backends: must have at least one element"},
		{"address without port", func() error { return s.SetMeshAccessLog("m", "n", "p", tcp("127.0.0.1", nil)) }, `backends[0].tcp.address: "127.0.0.1" must be host:port`},
		{"plain without text", func() error { return s.SetMeshAccessLog("m", "n", "p", tcp("h:1", &AccessLogFormat{Type: "Plain"})) }, "backends[0].tcp.format: type Plain needs a non-empty plain"},
		{"unknown format", func() error { return s.SetMeshAccessLog("m", "n", "p", tcp("h:1", &AccessLogFormat{Type: "Xml"})) }, `backends[0].tcp.format.type: "Xml" must be Plain or Json`},
		{"otel logs", func() error {
			return s.SetMeshAccessLog("m", "n", "p", MeshAccessLog{Backends: []AccessLogBackend{{Type: "OpenTelemetry"}}})
		}, "backends[0].type: OpenTelemetry access logs are not modelled"},
		{"bad policy name", func() error { return s.SetMeshAccessLog("m", "n", "Bad_Name", tcp("h:1", nil)) }, `MeshAccessLog name "Bad_Name"`},
		{"mesh with a dot", func() error { return s.SetMeshAccessLog("a.b", "n", "p", tcp("h:1", nil)) }, `mesh "a.b": must not contain '.'`},
		{"port out of range", func() error { return s.SetMeshMetric("m", "n", "p", prom(PrometheusBackend{Port: 70000})) }, "backends[0].prometheus.port: 70000 is not a port"},
		{"relative path", func() error { return s.SetMeshMetric("m", "n", "p", prom(PrometheusBackend{Path: "metrics"})) }, `backends[0].prometheus.path: "metrics" must start with /`},
		{"bad selector", func() error {
			m := prom(PrometheusBackend{})
			m.Sidecar = &MetricsSidecar{Profiles: &MetricsProfiles{Include: &[]MetricsSelector{{Type: "Glob", Match: "x"}}}}
			return s.SetMeshMetric("m", "n", "p", m)
		}, `sidecar.profiles.include[0].type: "Glob" must be Prefix, Regex, Exact or Contains`},
		{"otel without address", func() error {
			return s.SetMeshMetric("m", "n", "p", MeshMetric{Backends: []MetricsBackend{{Type: "OpenTelemetry", OpenTelemetry: &OpenTelemetryBackend{Name: "c"}}}})
		}, "backends[0].openTelemetry.endpoint.address: required"},
		{"bad refresh interval", func() error {
			return s.SetMeshMetric("m", "n", "p", MeshMetric{Backends: []MetricsBackend{{Type: "OpenTelemetry", OpenTelemetry: &OpenTelemetryBackend{Name: "c", Endpoint: OTelEndpoint{Address: "h"}, RefreshInterval: "soon"}}}})
		}, `backends[0].openTelemetry.refreshInterval: "soon" must be a positive duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.set()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if p := s.PoliciesFor("m", "n"); len(p.MeshAccessLogs)+len(p.MeshMetrics) != 0 {
		t.Errorf("rejected policies were stored: %+v", p)
	}
}

func TestPolicyAdminAPI(t *testing.T) {
	s := startTestServer(t, Options{})
	base := s.AdminURL() + "/proxies/payments/zp-egress-1"
	do := func(method, path, body string) (int, string) {
		t.Helper()
		return testutil.HTTP(t, method, base+path, body)
	}
	tests := []struct {
		method, path, body string
		code               int
		contains           string
	}{
		{"PUT", "/meshaccesslogs/zp-logs", `{"backends":[{"type":"Tcp","tcp":{"address":"127.0.0.1:5000","fromat":{}}}]}`, 400, `unknown field "fromat"`},
		{"PUT", "/meshaccesslogs/zp-logs", `{"backends":[{"type":"Tcp","tcp":{"address":"nohost"}}]}`, 400, `backends[0].tcp.address`},
		{"PUT", "/meshaccesslogs/zp-logs", `{"backends":[{"type":"Tcp","tcp":{"address":"127.0.0.1:5000"}}]}`, 200, `"meshAccessLogs":{"zp-logs":{"backends":[{"type":"Tcp","tcp":{"address":"127.0.0.1:5000"}}]}}`},
		{"PUT", "/meshmetrics/zp-metrics", `{"backends":[{"type":"Prometheus","prometheus":{}}]}`, 200, `"prometheus":{"clientId":"default-backend","port":5670,"path":"/metrics"}`},
		{"GET", "/policies", "", 200, `"withholdZoneListeners":false`},
		{"PUT", "/zone-listeners", `{}`, 400, "withheld: required"},
		{"PUT", "/zone-listeners", `{"withheld":true}`, 200, `"withholdZoneListeners":true`},
		{"DELETE", "/meshmetrics/zp-metrics", "", 200, `"meshMetrics":{}`},
		{"DELETE", "/meshmetrics/zp-metrics", "", 404, "no MeshMetric zp-metrics"},
		{"DELETE", "/meshaccesslogs/zp-logs", "", 200, `"meshAccessLogs":{}`},
	}
	for _, tt := range tests {
		code, body := do(tt.method, tt.path, tt.body)
		if code != tt.code || !strings.Contains(body, tt.contains) {
			t.Errorf("%s %s %s: %d %s\nwant %d containing %s", tt.method, tt.path, tt.body, code, body, tt.code, tt.contains)
		}
	}
}

func TestLoadPolicies(t *testing.T) {
	s := startTestServer(t, Options{})
	err := s.LoadPolicies([]byte(`{"payments/zp-egress-1": {"withholdZoneListeners": true,
		"meshMetrics": {"m": {"backends": [{"type": "Prometheus", "prometheus": {"port": 5671}}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := s.PoliciesFor("payments", "zp-egress-1")
	got := p.MeshMetrics["m"].Backends[0].Prometheus
	if !p.WithholdZoneListeners || got.Port != 5671 || got.Path != "/metrics" || got.ClientID != "default-backend" {
		t.Errorf("loaded %+v, prometheus %+v", p, got)
	}
	if err := s.LoadPolicies([]byte(`{"payments/zp-egress-1": {"meshAccessLogs": {"l": {"backends": []}}}}`)); err == nil ||
		!strings.Contains(err.Error(), "policies payments/zp-egress-1: MeshAccessLog l: backends: must have at least one element") {
		t.Errorf("got %v", err)
	}
	if p := s.PoliciesFor("payments", "zp-egress-1"); !p.WithholdZoneListeners || len(p.MeshMetrics) != 1 {
		t.Errorf("a rejected file changed the policies: %+v", p)
	}
}
