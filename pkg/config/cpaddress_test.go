package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A password in --cp-address is refused without being repeated, whatever
// else is wrong with the address.
func TestCPAddressCredentialsAreNeverEchoed(t *testing.T) {
	for _, addr := range []string{"https://u:hunter2@cp:5678", "http://u:hunter2@cp:5678/path?q"} {
		c := valid()
		c.CPAddress = addr
		_, err := c.Validate(time.Now())
		if err == nil || !strings.Contains(err.Error(), "must not hold a user name or password") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

// A CA file with a private key in it works (only its certificates are
// sent), with a warning to keep the key elsewhere.
func TestACAFileWithAKeyIsWarnedAbout(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	content := append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	c := valid()
	c.CACertFile = path
	warns, err := c.Validate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range warns {
		found = found || w.Key == "ca-cert-file" && strings.Contains(w.Message, "holds a private key too")
	}
	if !found {
		t.Errorf("no warning about the key: %v", warns)
	}
}
