package bootstraprewrite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// withoutRelayedParts drops what Rewrite may change, so the rest of two
// bootstraps can be compared.
func withoutRelayedParts(t *testing.T, doc []byte) tree {
	t.Helper()
	root := parseTree(t, doc)
	delete(root.obj("dynamicResources"), "adsConfig")
	delete(root, "hdsConfig")
	dropRelayCluster(root)
	return root
}

// dropRelayCluster removes the ADS cluster (system_ads), which Rewrite
// points at the relay.
func dropRelayCluster(root tree) {
	static := root.obj("staticResources")
	var kept []any
	for _, c := range root.list("staticResources", "clusters") {
		if c.(map[string]any)["name"] != ClusterName {
			kept = append(kept, c)
		}
	}
	static["clusters"] = kept
}

func TestRewritePointsADSAndHDSAtTheRelay(t *testing.T) {
	for _, role := range []config.Role{config.RoleIngress, config.RoleEgress, config.RoleCombined} {
		for _, form := range []string{"envoy_grpc", "google_grpc"} {
			t.Run(string(role)+"/"+form, func(t *testing.T) {
				b := fetchBootstrap(t, role)
				orig := b.yaml
				tokenPath := filepath.Join(t.TempDir(), "token")
				if form == "google_grpc" {
					orig = asReloadable(t, b, tokenPath)
				}
				sock := filepath.Join(b.workDir, "zoneproxy-xds.sock")
				res, err := Rewrite(orig, sock)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(res.JSON, []byte(b.token)) {
					t.Fatal("the rewritten bootstrap holds the token")
				}
				for _, gone := range []string{"initialMetadata", "googleGrpc", "callCredentials", tokenPath} {
					if bytes.Contains(res.JSON, []byte(gone)) {
						t.Errorf("the rewritten bootstrap still has %s", gone)
					}
				}

				root := parseTree(t, res.JSON)
				for _, path := range [][]string{{"dynamicResources", "adsConfig"}, {"hdsConfig"}} {
					svcs := root.list(append(path, "grpcServices")...)
					if len(svcs) != 1 || tree(svcs[0].(map[string]any)).str("envoyGrpc", "clusterName") != ClusterName {
						t.Errorf("%v grpc services = %v, want envoy_grpc %s", path, svcs, ClusterName)
					}
				}
				c := root.staticCluster(ClusterName)
				if c == nil {
					t.Fatalf("no %s cluster in\n%s", ClusterName, res.JSON)
				}
				endpoints := c.list("loadAssignment", "endpoints")
				lb := tree(tree(endpoints[0].(map[string]any)).list("lbEndpoints")[0].(map[string]any))
				if lb.str("endpoint", "address", "pipe", "path") != sock || c.str("type") != "STATIC" || c["transportSocket"] != nil || c["upstreamConnectionOptions"] != nil {
					t.Errorf("relay cluster = %v", c)
				}
				ads := tree(root.list("dynamicResources", "adsConfig", "grpcServices")[0].(map[string]any))
				if ads.obj("envoyGrpc")["maxReceiveMessageLength"] == nil && form == "google_grpc" {
					t.Error("the control plane's message size limit was lost")
				}
				if !reflect.DeepEqual(withoutRelayedParts(t, orig), withoutRelayedParts(t, res.JSON)) {
					t.Errorf("parts other than ADS/HDS changed:\n--- original\n%s\n--- rewritten\n%s", orig, res.JSON)
				}

				want := cpdial.Target{Address: b.cpAddr, ServerName: hostOf(b.cpAddr), CAPEM: b.caPEM, HadToken: true, HDS: true}
				if form == "google_grpc" {
					want.GoogleGRPC, want.TokenPath, want.MaxReceiveMessageLength = true, tokenPath, 4194304
				}
				if !reflect.DeepEqual(res.Upstream, want) {
					t.Errorf("upstream = %+v\nwant %+v", res.Upstream, want)
				}
				// The admin address comes with the rewrite: nobody parses
				// the document again for it.
				gotAdmin, err := envoy.AdminFromSection(res.Admin)
				wantAdmin, werr := envoy.AdminFromBootstrap(orig)
				if err != nil || werr != nil || gotAdmin != wantAdmin {
					t.Errorf("admin = %v (%v), want %v (%v)", gotAdmin, err, wantAdmin, werr)
				}

				if msg := validateWithStandIn(t, orig); msg != "" {
					t.Fatalf("the stand-in rejects the control plane's own bootstrap: %s", msg)
				}
				if msg := validateWithStandIn(t, res.JSON); msg != "" {
					t.Errorf("the stand-in rejects the rewritten bootstrap: %s\n%s", msg, res.JSON)
				}
			})
		}
	}
}

// Envoy takes snake_case as well; metadata other than the token goes to
// the relay, not to Envoy.
func TestRewriteSnakeCaseAndExtraMetadata(t *testing.T) {
	doc := `
node: {id: default.zp, cluster: zp}
dynamic_resources:
  ads_config:
    api_type: DELTA_GRPC
    transport_api_version: V3
    grpc_services:
    - envoy_grpc: {cluster_name: cp}
      initial_metadata:
      - {key: authorization, value: secret-token-123}
      - {key: X-Zone, value: east}
  cds_config: {ads: {}}
static_resources:
  clusters:
  - name: cp
    type: STRICT_DNS
    connect_timeout: 2s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        '@type': type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: cp
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: cp.example, port_value: 5678}}}}]}]
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        '@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: cp.example
        common_tls_context:
          validation_context:
            trusted_ca: {inline_string: "-----BEGIN CERTIFICATE-----"}
`
	res, err := Rewrite([]byte(doc), "/run/zp/xds.sock")
	if err != nil {
		t.Fatal(err)
	}
	want := cpdial.Target{Address: "cp.example:5678", ServerName: "cp.example", CAPEM: []byte("-----BEGIN CERTIFICATE-----"),
		Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}, HadToken: true}
	if !reflect.DeepEqual(res.Upstream, want) {
		t.Errorf("upstream = %+v\nwant %+v", res.Upstream, want)
	}
	for _, gone := range []string{"secret-token-123", "east", "initial_metadata", "transport_socket", "cp.example"} {
		if bytes.Contains(res.JSON, []byte(gone)) {
			t.Errorf("rewritten bootstrap still has %q:\n%s", gone, res.JSON)
		}
	}
	if !bytes.Contains(res.JSON, []byte(`"connect_timeout":"2s"`)) || !bytes.Contains(res.JSON, []byte("/run/zp/xds.sock")) {
		t.Errorf("relay cluster lost its settings or socket:\n%s", res.JSON)
	}
}

func TestRewriteRefuses(t *testing.T) {
	good := fetchBootstrap(t, config.RoleIngress)
	sock := filepath.Join(good.workDir, "xds.sock")
	leak := strings.Replace(string(good.yaml), "workdir:", "leak: "+good.token+"\n    workdir:", 1)
	noTLS := parseTree(t, good.yaml)
	delete(noTLS.staticCluster(ClusterName), "transportSocket")
	noTLSDoc, _ := json.Marshal(noTLS)
	for _, tc := range []struct {
		name, doc, sock, want string
	}{
		{"not yaml", "{", sock, "not YAML"},
		{"no ads", "node: {id: a.b}\n", sock, "no dynamic_resources.ads_config"},
		{"missing cluster", strings.Replace(string(good.yaml), "clusterName: "+ClusterName, "clusterName: other", 1), sock, `static cluster "other"`},
		{"plaintext control plane", string(noTLSDoc), sock, "without TLS"},
		{"token elsewhere", leak, sock, "would still hold the dataplane token"},
		{"relative socket", string(good.yaml), "xds.sock", "must be absolute"},
		{"socket too long", string(good.yaml), "/" + strings.Repeat("d", 120) + "/x.sock", "use a shorter --work-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rewrite([]byte(tc.doc), tc.sock)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), good.token) {
				t.Fatal("the error holds the token")
			}
		})
	}
}

// The rewrite does not depend on the work dir existing yet.
func TestRewriteIsPure(t *testing.T) {
	b := fetchBootstrap(t, config.RoleEgress)
	a1, err := Rewrite(b.yaml, "/nonexistent/xds.sock")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := Rewrite(b.yaml, "/nonexistent/xds.sock")
	if !bytes.Equal(a1.JSON, a2.JSON) {
		t.Fatal("two rewrites of one bootstrap differ")
	}
	if _, err := os.Stat("/nonexistent"); err == nil {
		t.Fatal("rewrite created files")
	}
}

// The rewritten bootstrap is JSON, which YAML parsers (Envoy's for a .yaml
// file) read as the same tree; non-string YAML keys become strings.
func TestRewriteWritesJSONThatIsTheSameAsYAML(t *testing.T) {
	doc := strings.Replace(string(fetchBootstrap(t, config.RoleEgress).yaml), "node:", "extra: {1: one, true: yes, 4294967295: big}\nnode:", 1)
	res, err := Rewrite([]byte(doc), "/run/zp/xds.sock")
	if err != nil {
		t.Fatal(err)
	}
	var asJSON, asYAML any
	if err := json.Unmarshal(res.JSON, &asJSON); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, res.JSON)
	}
	if err := yaml.Unmarshal(res.JSON, &asYAML); err != nil {
		t.Fatalf("not YAML: %v", err)
	}
	if got := fmt.Sprint(asJSON.(map[string]any)["extra"]); got != "map[1:one 4294967295:big true:yes]" {
		t.Errorf("extra = %s", got)
	}
	js, _ := json.Marshal(asYAML)
	again, _ := json.Marshal(asJSON)
	if !bytes.Equal(js, again) {
		t.Errorf("read as YAML:\n%s\nread as JSON:\n%s", js, again)
	}
}

// What yaml.v3 reads as a string reaches Envoy as that string: quoted
// scalars, and plain ones that are no number, bool or null by yaml.v3's
// rules, such as an Envoy build hash starting 0b or 0o. The control plane
// (sigs.k8s.io/yaml) quotes the strings that would read otherwise.
func TestRewriteKeepsStringsThatLookNumeric(t *testing.T) {
	doc := string(fetchBootstrap(t, config.RoleEgress).yaml)
	if !strings.Contains(doc, `build: ""`) {
		t.Fatalf("no envoy build in the control plane's node metadata:\n%s", doc)
	}
	for _, tc := range []struct {
		written string
		want    any
	}{
		{"0b3f9e1c2d/1.33.0/Clean/RELEASE/BoringSSL", "0b3f9e1c2d/1.33.0/Clean/RELEASE/BoringSSL"},
		{"0o7e3d/1.33.0/Clean/RELEASE/BoringSSL", "0o7e3d/1.33.0/Clean/RELEASE/BoringSSL"},
		{"0b12", "0b12"},
		{"0b", "0b"},
		{"0o8", "0o8"},
		{"0oz", "0oz"},
		{"1.5s", "1.5s"},
		{"127.0.0.1", "127.0.0.1"},
		{"yes", "yes"},
		{`"0b101"`, "0b101"},
		{`'0o17'`, "0o17"},
		{`"0x1F"`, "0x1F"},
		{`"1_000"`, "1_000"},
		{`"1e3"`, "1e3"},
		{`"2001-12-14"`, "2001-12-14"},
		{`"9901"`, "9901"},
		{"9901", 9901.0}, // a number stays a number
		{"0b101", 5.0},   // yaml.v3's binary int; the control plane writes the string quoted, as above
		{"true", true},
	} {
		res, err := Rewrite([]byte(strings.Replace(doc, `build: ""`, "build: "+tc.written, 1)), "/run/zp/xds.sock")
		if err != nil {
			t.Fatalf("%s: %v", tc.written, err)
		}
		var out struct {
			Node struct {
				Metadata struct {
					Version struct {
						Envoy struct{ Build any }
					}
				}
			}
		}
		if err := json.Unmarshal(res.JSON, &out); err != nil {
			t.Fatal(err)
		}
		if got := out.Node.Metadata.Version.Envoy.Build; got != tc.want {
			t.Errorf("build: %s reaches Envoy as %#v, want %#v", tc.written, got, tc.want)
		}
	}
}

// BenchmarkRewrite is what every start pays between the control plane's
// answer and Envoy's launch, on the control plane's egress bootstrap.
func BenchmarkRewrite(b *testing.B) {
	doc := fetchBootstrap(b, config.RoleEgress).yaml
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Rewrite(doc, "/run/zoneproxy/zoneproxy-xds.sock"); err != nil {
			b.Fatal(err)
		}
	}
}
