package controlplane

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// writeServerCert puts a CA and a DP server certificate with these DNS
// SANs (plus localhost and the loopback IPs) where the CP loads them.
func writeServerCert(t *testing.T, dir string, dnsNames ...string) {
	t.Helper()
	p := testutil.NewPKI(t, append([]string{"localhost"}, dnsNames...), []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{caCertFileName: p.CAPEM, serverCertFileName: p.CertPEM, serverKeyFileName: p.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// kuma-cp (pkg/xds/bootstrap/generator.go, validateRequest) checks the
// request host with x509.Certificate.VerifyHostname: IP SANs for an IP,
// else DNS SANs case-insensitively, where "*.x" stands for exactly one label.
func TestBootstrapHostIsCheckedLikeKumaCP(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	writeServerCert(t, dir, "*.cp.example", "cp.internal")
	s := startTestServer(t, Options{Dir: dir, Meshes: []string{"payments"}})
	tok, err := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-egress"})
	if err != nil {
		t.Fatal(err)
	}
	body := mustJSON(t, bootstrapBody("payments", "zp-egress-1", tok, dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener)))
	const sans = `["127.0.0.1" "::1" "localhost" "*.cp.example" "cp.internal"]`

	tests := []struct {
		host   string
		status int
	}{
		{"cp.internal", 200},
		{"cp.internal:5678", 200},
		{"CP.Internal", 200},
		{"127.0.0.1", 200},
		{"[::1]:5678", 200},
		{"zone.cp.example", 200},
		{"cp.example", 400},
		{"a.zone.cp.example", 400},
		{"other.internal", 400},
		{"127.0.0.2", 400},
	}
	c := httpClient(t, s, true)
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, s.URL()+"/bootstrap", bytes.NewReader(body))
			req.Header.Set("Accept", "application/json")
			req.Host = tt.host
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, got)
			}
			if tt.status != 400 {
				return
			}
			host, _, err := net.SplitHostPort(tt.host)
			if err != nil {
				host = tt.host
			}
			if want := sanMismatchText(host, sans); string(got) != want {
				t.Fatalf("body\n%q\nwant kuma-cp's\n%q", got, want)
			}
		})
	}
}
