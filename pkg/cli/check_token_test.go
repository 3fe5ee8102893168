package cli

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// check describes the token run would send, from the file or inline.
func TestCheckToken(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	tok := enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"Mesh":"payments","Workload":"zp","exp":1900000000}`)) + ".czNjcjN0c2ln"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const described = `[ ok ] dataplane token is a JWT for mesh "payments", workload "zp", expires 2030-03-17T17:46:40Z`
	cases := []struct {
		name string
		cfg  config.Config
		want string
	}{
		{"file", config.Config{DataplaneTokenFile: file}, described},
		{"inline", config.Config{DataplaneToken: tok}, described},
		{"gone since validation", config.Config{DataplaneTokenFile: file + ".gone"}, "[FAIL] dataplane token\n       open " + file + ".gone: no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			(&checklist{w: &out}).checkToken(&tc.cfg)
			if !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("check says %q, want %q", out.String(), tc.want)
			}
			if strings.Contains(out.String(), "czNjcjN0c2ln") {
				t.Error("the token is printed")
			}
		})
	}
}
