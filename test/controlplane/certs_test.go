package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCertsWrittenAndReused(t *testing.T) {
	dir := t.TempDir()
	c1, err := loadOrCreateCerts(dir)
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

	c2, err := loadOrCreateCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c1.caPEM, c2.caPEM) {
		t.Errorf("valid certificates in the dir were not reused")
	}

	if err := os.WriteFile(filepath.Join(dir, serverKeyFileName), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	c3, err := loadOrCreateCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c1.caPEM, c3.caPEM) {
		t.Errorf("broken files were reused")
	}
}
