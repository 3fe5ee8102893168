package controlplane

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"os"
	"path/filepath"
	"testing"
)

func TestCertsWrittenAndReused(t *testing.T) {
	dir := t.TempDir()
	c1, err := loadOrCreateCerts(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{caCertFileName: 0o644, serverCertFileName: 0o644, serverKeyFileName: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	if !c1.caCert.IsCA || c1.leaf.IsCA {
		t.Errorf("CA IsCA=%t leaf IsCA=%t", c1.caCert.IsCA, c1.leaf.IsCA)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := c1.leaf.VerifyHostname(h); err != nil {
			t.Errorf("leaf does not cover %s: %v", h, err)
		}
	}
	if got := c1.sanList(); got != `["127.0.0.1" "::1" "localhost"]` {
		t.Errorf("SAN list %s", got)
	}

	c2, err := loadOrCreateCerts(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c1.caPEM, c2.caPEM) {
		t.Errorf("valid certificates in the dir were not reused")
	}

	if err := os.WriteFile(filepath.Join(dir, serverKeyFileName), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	c3, err := loadOrCreateCerts(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c1.caPEM, c3.caPEM) {
		t.Errorf("broken files were reused")
	}
}

// The RSA key kuma-cp makes for itself, when asked for; a dir holding the
// other kind of key is not reused.
func TestRSAServerKey(t *testing.T) {
	dir := t.TempDir()
	ec, err := loadOrCreateCerts(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ec.leaf.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Fatalf("default key %T, want ECDSA", ec.leaf.PublicKey)
	}
	r, err := loadOrCreateCerts(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := r.leaf.PublicKey.(*rsa.PublicKey)
	if !ok || pub.N.BitLen() != 2048 {
		t.Fatalf("key %T, want RSA 2048", r.leaf.PublicKey)
	}
	again, err := loadOrCreateCerts(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.caPEM, again.caPEM) {
		t.Error("the RSA certificates in the dir were not reused")
	}
	if _, ok := again.tlsCert.PrivateKey.(*rsa.PrivateKey); !ok {
		t.Errorf("reloaded private key %T", again.tlsCert.PrivateKey)
	}
}
