package controlplane

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
)

// fetchBootstrap posts body and strictly decodes the returned bootstrap.
func fetchBootstrap(t *testing.T, s *Server, host string, body map[string]any) *bootstrapv3.Bootstrap {
	t.Helper()
	c := httpClient(t, s, true)
	url := s.URL()
	if host != "" {
		url = "https://" + host + ":" + strconv.Itoa(int(s.port()))
	}
	r := post(t, c, url+"/bootstrap", mustJSON(t, body), "application/json")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var resp struct {
		Bootstrap []byte `json:"bootstrap"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatal(err)
	}
	return decodeBootstrapYAML(t, resp.Bootstrap)
}

func decodeBootstrapYAML(t *testing.T, y []byte) *bootstrapv3.Bootstrap {
	t.Helper()
	js, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, b); err != nil {
		t.Fatalf("strict unmarshal: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("ValidateAll: %v", err)
	}
	return b
}

func clusterByName(b *bootstrapv3.Bootstrap, name string) *clusterv3.Cluster {
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

func TestBootstrapShape(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	caPEM, err := os.ReadFile(s.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	res := dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener)
	b := fetchBootstrap(t, s, "", bootstrapBody("payments", "zp-egress-1", "the-token", res))

	top := []string{}
	js, _ := protojson.Marshal(b)
	var m map[string]any
	_ = json.Unmarshal(js, &m)
	for k := range m {
		top = append(top, k)
	}
	for _, k := range []string{"admin", "defaultRegexEngine", "dynamicResources", "hdsConfig", "layeredRuntime", "node", "staticResources", "statsConfig"} {
		if _, ok := m[k]; !ok {
			t.Errorf("top-level key %s missing (have %v)", k, top)
		}
	}
	if len(m) != 8 {
		t.Errorf("top-level keys %v, want exactly kuma's 8", top)
	}

	if got := b.GetAdmin().GetAddress().GetPipe(); got.GetPath() != "/tmp/zp-work/kuma-envoy-admin.sock" || got.GetMode() != 0o600 {
		t.Errorf("admin pipe %v", got)
	}
	if got := b.GetAdmin().GetAccessLog(); len(got) != 1 || got[0].GetName() != "envoy.access_loggers.file" {
		t.Errorf("admin access log %v", got)
	}
	if got := b.GetNode().GetId(); got != "payments.zp-egress-1" {
		t.Errorf("node id %q", got)
	}
	if got := b.GetNode().GetCluster(); got != "zp-egress" {
		t.Errorf("node cluster %q", got)
	}
	md := b.GetNode().GetMetadata().GetFields()
	wantStrings := map[string]string{
		"dataplane.resource":               res,
		"dataplane.proxyType":              "dataplane",
		"dataplane.admin.port":             "9901",
		"dataplane.admin.address":          "127.0.0.1",
		"dataplane.admin.socketPath":       "/tmp/zp-work/kuma-envoy-admin.sock",
		"dataplane.readinessReporter.port": "9902",
		"dataplane.dns.port":               "15053",
		"workdir":                          "/tmp/zp-work",
		"systemCaPath":                     "/etc/ssl/certs/ca-certificates.crt",
		"metricsCertPath":                  "",
		"metricsKeyPath":                   "",
		"spireAgent.socketPath":            "",
	}
	for k, want := range wantStrings {
		v, ok := md[k]
		if !ok {
			t.Errorf("metadata %s missing", k)
			continue
		}
		if _, isStr := v.GetKind().(*structpb.Value_StringValue); !isStr || v.GetStringValue() != want {
			t.Errorf("metadata %s = %v, want string %q", k, v, want)
		}
	}
	if md["ipv6Enabled"].GetBoolValue() || md["ipv6Enabled"] == nil {
		t.Errorf("ipv6Enabled %v", md["ipv6Enabled"])
	}
	if f := md["features"].GetListValue().GetValues(); len(f) != 1 || f[0].GetStringValue() != "feature-reuse-port" {
		t.Errorf("features %v", f)
	}
	if v := md["version"].GetStructValue().GetFields()["envoy"].GetStructValue().GetFields()["version"].GetStringValue(); v != "1.39.0" {
		t.Errorf("version.envoy.version %q", v)
	}
	if _, ok := md["dynamicMetadata"]; ok {
		t.Errorf("empty dynamicMetadata should be omitted")
	}

	ads := b.GetDynamicResources().GetAdsConfig()
	if ads.GetApiType() != corev3.ApiConfigSource_DELTA_GRPC || ads.GetTransportApiVersion() != corev3.ApiVersion_V3 || !ads.GetSetNodeOnFirstMessageOnly() {
		t.Errorf("ads config %v", ads)
	}
	for _, src := range []*corev3.ApiConfigSource{ads, b.GetHdsConfig()} {
		gs := src.GetGrpcServices()
		if len(gs) != 1 || gs[0].GetEnvoyGrpc().GetClusterName() != "system_ads" {
			t.Fatalf("grpc services %v", gs)
		}
		im := gs[0].GetInitialMetadata()
		if len(im) != 1 || im[0].GetKey() != "authorization" || im[0].GetValue() != "the-token" {
			t.Errorf("initial metadata %v", im)
		}
	}
	if b.GetHdsConfig().GetApiType() != corev3.ApiConfigSource_GRPC {
		t.Errorf("hds api type %v", b.GetHdsConfig().GetApiType())
	}
	for _, cs := range []*corev3.ConfigSource{b.GetDynamicResources().GetLdsConfig(), b.GetDynamicResources().GetCdsConfig()} {
		if cs.GetAds() == nil || cs.GetInitialFetchTimeout().AsDuration() != 0 || cs.GetInitialFetchTimeout() == nil || cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
			t.Errorf("lds/cds config %v", cs)
		}
	}

	sink := clusterByName(b, "system_access_log_sink")
	if p := sink.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetPipe().GetPath(); p != "/tmp/zp-work/kuma-al-zp-egress-1-payments.sock" {
		t.Errorf("access log pipe %q", p)
	}
	adsCl := clusterByName(b, "system_ads")
	if adsCl.GetType() != clusterv3.Cluster_STATIC {
		t.Errorf("system_ads type %v for an IP host", adsCl.GetType())
	}
	sa := adsCl.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != s.port() {
		t.Errorf("system_ads endpoint %v", sa)
	}
	if adsCl.GetConnectTimeout().AsDuration().Seconds() != 1 {
		t.Errorf("connect timeout %v", adsCl.GetConnectTimeout())
	}
	ka := adsCl.GetUpstreamConnectionOptions().GetTcpKeepalive()
	if ka.GetKeepaliveProbes().GetValue() != 3 || ka.GetKeepaliveTime().GetValue() != 10 || ka.GetKeepaliveInterval().GetValue() != 10 {
		t.Errorf("keepalive %v", ka)
	}
	if _, ok := adsCl.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]; !ok {
		t.Errorf("no http2 protocol options")
	}
	utc := &tlsv3.UpstreamTlsContext{}
	if adsCl.GetTransportSocket().GetName() != "envoy.transport_sockets.tls" {
		t.Errorf("transport socket %v", adsCl.GetTransportSocket().GetName())
	}
	if err := adsCl.GetTransportSocket().GetTypedConfig().UnmarshalTo(utc); err != nil {
		t.Fatal(err)
	}
	if utc.GetSni() != "127.0.0.1" || utc.GetCommonTlsContext().GetTlsParams().GetTlsMinimumProtocolVersion() != tlsv3.TlsParameters_TLSv1_2 ||
		utc.GetCommonTlsContext().GetValidationContextSdsSecretConfig().GetName() != "cp_validation_ctx" {
		t.Errorf("upstream tls %v", utc)
	}

	secrets := b.GetStaticResources().GetSecrets()
	if len(secrets) != 1 || secrets[0].GetName() != "cp_validation_ctx" {
		t.Fatalf("secrets %v", secrets)
	}
	vc := secrets[0].GetValidationContext()
	if string(vc.GetTrustedCa().GetInlineBytes()) != string(caPEM) {
		t.Errorf("trusted CA is not the server CA")
	}
	sans := vc.GetMatchTypedSubjectAltNames()
	if len(sans) != 2 || sans[0].GetSanType() != tlsv3.SubjectAltNameMatcher_DNS || sans[0].GetMatcher().GetExact() != "127.0.0.1" ||
		sans[1].GetSanType() != tlsv3.SubjectAltNameMatcher_IP_ADDRESS || sans[1].GetMatcher().GetExact() != "127.0.0.1" {
		t.Errorf("SAN matchers %v", sans)
	}
	if b.GetDefaultRegexEngine().GetName() != "envoy.regex_engines.google_re2" {
		t.Errorf("regex engine %v", b.GetDefaultRegexEngine())
	}
	if l := b.GetLayeredRuntime().GetLayers(); len(l) != 1 || l[0].GetName() != "kuma" ||
		l[0].GetStaticLayer().GetFields()["re2.max_program_size.error_level"].GetNumberValue() != 4294967295 {
		t.Errorf("layered runtime %v", l)
	}
	if tags := b.GetStatsConfig().GetStatsTags(); len(tags) != 4 {
		t.Errorf("stats tags %v", tags)
	}
}

func TestBootstrapLocalhostIsStrictDNS(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	res := dpJSON(t, "payments", "zp", "", ingressListener)
	b := fetchBootstrap(t, s, "localhost", bootstrapBody("payments", "zp", "tok", res))
	adsCl := clusterByName(b, "system_ads")
	if adsCl.GetType() != clusterv3.Cluster_STRICT_DNS || adsCl.GetDnsLookupFamily() != clusterv3.Cluster_AUTO {
		t.Errorf("system_ads type %v family %v", adsCl.GetType(), adsCl.GetDnsLookupFamily())
	}
	sa := adsCl.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "localhost" {
		t.Errorf("endpoint %v", sa)
	}
	sans := b.GetStaticResources().GetSecrets()[0].GetValidationContext().GetMatchTypedSubjectAltNames()
	if sans[0].GetMatcher().GetExact() != "localhost" || sans[1].GetMatcher().GetExact() != "localhost" {
		t.Errorf("SANs %v", sans)
	}
	if b.GetNode().GetCluster() != "unknown" {
		t.Errorf("cluster without workload label = %q, want unknown", b.GetNode().GetCluster())
	}
}

func TestBootstrapVariants(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	caPEM, _ := os.ReadFile(s.CACertFile())

	t.Run("no workdir: TCP admin on the Dataplane's admin port", func(t *testing.T) {
		res := `{"type":"Dataplane","mesh":"payments","name":"zp","networking":{"address":"127.0.0.1","admin":{"port":9950},"listeners":[{"type":"ZoneEgress","address":"127.0.0.1","port":10002}]}}`
		body := bootstrapBody("payments", "zp", "tok", res)
		body["workdir"] = ""
		b := fetchBootstrap(t, s, "", body)
		sa := b.GetAdmin().GetAddress().GetSocketAddress()
		if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 9950 {
			t.Errorf("admin %v", b.GetAdmin().GetAddress())
		}
		md := b.GetNode().GetMetadata().GetFields()
		if md["dataplane.admin.port"].GetStringValue() != "9950" {
			t.Errorf("admin port metadata %v", md["dataplane.admin.port"])
		}
		if _, ok := md["dataplane.admin.socketPath"]; ok {
			t.Errorf("socketPath without workdir")
		}
	})
	t.Run("no workdir, default admin port", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
		body["workdir"] = ""
		b := fetchBootstrap(t, s, "", body)
		if b.GetAdmin().GetAddress().GetSocketAddress().GetPortValue() != 9901 {
			t.Errorf("admin %v", b.GetAdmin().GetAddress())
		}
	})
	t.Run("long workdir is cut at 98 characters", func(t *testing.T) {
		wd := "/" + strings.Repeat("w", 120)
		body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
		body["workdir"] = wd
		b := fetchBootstrap(t, s, "", body)
		p := b.GetAdmin().GetAddress().GetPipe().GetPath()
		if p != wd[:98]+".sock" {
			t.Errorf("admin pipe %q", p)
		}
	})
	t.Run("token path only: no credential in the bootstrap", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
		delete(body, "dataplaneToken")
		b := fetchBootstrap(t, s, "", body)
		if im := b.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetInitialMetadata(); len(im) != 0 {
			t.Errorf("initial metadata %v", im)
		}
	})
	t.Run("caCert from the request is the trusted CA", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
		body["caCert"] = string(caPEM) + "\n"
		b := fetchBootstrap(t, s, "", body)
		got := b.GetStaticResources().GetSecrets()[0].GetValidationContext().GetTrustedCa().GetInlineBytes()
		if string(got) != string(caPEM)+"\n" {
			t.Errorf("trusted CA %q", got)
		}
	})
	t.Run("dynamic metadata and probe proxy", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
		body["dynamicMetadata"] = map[string]string{"HOST_IP": "10.0.0.1"}
		body["appProbeProxyDisabled"] = true
		delete(body, "readinessPort")
		b := fetchBootstrap(t, s, "", body)
		md := b.GetNode().GetMetadata().GetFields()
		if md["dynamicMetadata"].GetStructValue().GetFields()["HOST_IP"].GetStringValue() != "10.0.0.1" {
			t.Errorf("dynamicMetadata %v", md["dynamicMetadata"])
		}
		if md["dataplane.appProbeProxy.enabled"].GetStringValue() != "true" {
			t.Errorf("appProbeProxy %v", md["dataplane.appProbeProxy.enabled"])
		}
		if _, ok := md["dataplane.readinessReporter.port"]; ok {
			t.Errorf("readiness port present without readinessPort")
		}
	})
	t.Run("raw YAML equals the decoded JSON bootstrap", func(t *testing.T) {
		c := httpClient(t, s, true)
		body := mustJSON(t, bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener)))
		j := post(t, c, s.URL()+"/bootstrap", body, "application/json")
		y := post(t, c, s.URL()+"/bootstrap", body, "")
		var resp struct {
			Bootstrap string `json:"bootstrap"`
		}
		if err := json.Unmarshal(j.body, &resp); err != nil {
			t.Fatal(err)
		}
		dec, err := base64.StdEncoding.DecodeString(resp.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		if string(dec) != string(y.body) {
			t.Errorf("YAML differs between the JSON and raw answers")
		}
		decodeBootstrapYAML(t, y.body)
	})
}
