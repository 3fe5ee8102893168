package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
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
	pki := testutil.NewPKI(t, nil, nil)
	path := filepath.Join(t.TempDir(), "ca.pem")
	content := append(append([]byte(nil), pki.KeyPEM...), pki.CAPEM...)
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
