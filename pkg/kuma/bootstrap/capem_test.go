package bootstrap

import (
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// A combined file (key first, then the CA, then another CA) sends the
// control plane its certificates only, in order: kuma-cp reads the first
// block of caCert, and a private key never leaves the host.
func TestTheRequestCarriesTheCAFilesCertificatesOnly(t *testing.T) {
	pki1, pki2 := testutil.NewPKI(t, nil, nil), testutil.NewPKI(t, nil, nil)
	ca1, key, ca2 := pki1.CAPEM, pki1.KeyPEM, pki2.CAPEM
	combined := append(append(append([]byte("comment line\n"), key...), ca1...), ca2...)
	cfg := &config.Config{Mesh: "payments", Role: config.RoleEgress, Address: "127.0.0.1", EgressPort: 10002}
	cfg.Complete(config.Host{Hostname: "vm1"})
	got := newRequest(cfg, "/wd", envoy.Version{Version: "1.39.0"}, combined).CACert
	if got != string(ca1)+string(ca2) {
		t.Errorf("caCert is\n%s\nwant the two certificates only:\n%s%s", got, ca1, ca2)
	}
	if strings.Contains(got, "PRIVATE KEY") {
		t.Error("the private key would be sent")
	}
	if certificatesOnly([]byte("no PEM here")) != "" {
		t.Error("text without PEM blocks is not empty")
	}
}
