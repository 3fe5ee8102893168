package bootstraprewrite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// The control plane's CA as Envoy's DataSource gives it.
func TestDataSource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, []byte("from a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		ds      *corev3.DataSource
		want    string
		wantErr string
	}{
		{"inline bytes", &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("pem")}}, "pem", ""},
		{"inline string", &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "pem"}}, "pem", ""},
		{"file", &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: file}}, "from a file", ""},
		{"missing file", &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: file + ".gone"}}, "", "no such file"},
		{"environment variable", &corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "CA"}}, "", "neither inline_bytes"},
		{"empty", &corev3.DataSource{}, "", "neither inline_bytes"},
		{"absent", nil, "", "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dataSource(tc.ds)
			if string(got) != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got %q, %v; want %q, an error with %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// Shapes of the ADS service the relay cannot serve: each is refused by
// what is wrong (the agent then lets Envoy talk to the control plane).
func TestRewriteRefusesADSShapes(t *testing.T) {
	const ads = "dynamic_resources:\n  ads_config:\n    api_type: GRPC\n    grpc_services:\n    - "
	for _, tc := range []struct{ name, doc, want string }{
		{"envoy_grpc without a cluster", ads + "envoy_grpc: {}\n", "no cluster_name"},
		{"neither envoy_grpc nor google_grpc", ads + "timeout: 1s\n", "neither envoy_grpc nor google_grpc"},
		{"google_grpc without TLS", ads + "google_grpc: {target_uri: 'cp:5678', stat_prefix: ads}\n", "no ssl_credentials"},
		{"google_grpc target not host:port", ads + "google_grpc: {target_uri: 'cp', stat_prefix: ads}\n", "not host:port"},
		{"a field this build does not know", ads + "envoy_grpc: {cluster_name: cp, newer_field: 1}\n", `unknown field "newer_field"`},
		{"a cluster on a pipe", ads + "envoy_grpc: {cluster_name: cp}\nstatic_resources:\n  clusters:\n  - name: cp\n    load_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {pipe: {path: /cp.sock}}}}]}]}\n", "no endpoint with a socket address and port"},
		{"another transport socket", ads + "envoy_grpc: {cluster_name: cp}\nstatic_resources:\n  clusters:\n  - name: cp\n    load_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: cp, port_value: 5678}}}}]}]}\n    transport_socket: {name: raw, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}\n", "without TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Rewrite([]byte(tc.doc), "/run/zp/xds.sock"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
