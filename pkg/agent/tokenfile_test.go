package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

func TestWarnIfEnvoyReadsUntrimmedToken(t *testing.T) {
	direct := `grpc_services: [{google_grpc: {call_credentials: [{from_plugin: {name: envoy.grpc_credentials.file_based_metadata}}]}}]`
	relayed := `grpc_services: [{envoy_grpc: {cluster_name: zoneproxy_xds_relay}}]`
	cases := []struct {
		name      string
		token     string
		bootstrap string
		relay     bool
		warn      bool
	}{
		{"newline, Envoy reads the file", "header.payload.sig\n", direct, false, true},
		{"leading space, Envoy reads the file", " header.payload.sig", direct, false, true},
		{"clean file", "header.payload.sig", direct, false, false},
		{"newline, relayed", "header.payload.sig\n", direct, true, false},
		{"newline, token in the bootstrap", "header.payload.sig\n", relayed, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(path, []byte(tc.token), 0o600); err != nil {
				t.Fatal(err)
			}
			a, logs := testAgent(t, &config.Config{DataplaneTokenFile: path})
			if tc.relay {
				a.xds.set(&fakeXDS{})
			}
			a.warnIfEnvoyReadsUntrimmedToken([]byte(tc.bootstrap))
			got := logs.FilterMessageSnippet("reads the dataplane token file itself").Len() == 1
			if got != tc.warn {
				t.Errorf("warned %v, want %v", got, tc.warn)
			}
			for _, e := range logs.All() {
				for _, f := range e.Context {
					if f.String == tc.token || f.String == "header.payload.sig" {
						t.Errorf("the token is logged: %v", e.Context)
					}
				}
			}
		})
	}
}
