package bootstrap

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// A combined file (key first, then the CA, then another CA) sends the
// control plane its certificates only, in order: kuma-cp reads the first
// block of caCert, and a private key never leaves the host.
func TestTheRequestCarriesTheCAFilesCertificatesOnly(t *testing.T) {
	ca1, key := selfSigned(t, "ca-1")
	ca2, _ := selfSigned(t, "ca-2")
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
