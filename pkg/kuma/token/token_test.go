package token

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fakeJWT(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"1","typ":"JWT"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

func TestCheck(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name, raw, want string
	}{
		{"mesh-wide token", fakeJWT(`{"Mesh":"payments","exp":1900000000,"nbf":1700000000}`), ""},
		{"workload-bound", fakeJWT(`{"Mesh":"payments","Workload":"zp-egress"}`), ""},
		{"unbound", fakeJWT(`{}`), ""},
		{"expired", fakeJWT(`{"Mesh":"payments","exp":1700000000}`), "token expired at 2023-11-14T22:13:20Z (the clock says 2027-01-15T08:00:00Z)"},
		{"expires this second", fakeJWT(`{"exp":1800000000}`), "expired"},
		{"a fractional expiry, still valid", fakeJWT(`{"Mesh":"payments","exp":1900000000.5}`), ""},
		{"a fractional expiry, past", fakeJWT(`{"Mesh":"payments","exp":1700000000.25}`), "token expired at 2023-11-14T22:13:20Z"},
		{"not yet valid", fakeJWT(`{"Mesh":"payments","nbf":1800000001}`), "not valid before 2027-01-15T08:00:01Z"},
		{"other mesh", fakeJWT(`{"Mesh":"billing"}`), `token is for mesh "billing", but --mesh is "payments": one of the two is likely a typo; set --mesh billing if this proxy serves that mesh, or issue a token for mesh payments`},
		{"other workload", fakeJWT(`{"Workload":"zp-ingress"}`), `workload "zp-ingress"`},
		{"other name", fakeJWT(`{"Name":"other"}`), `name "other"`},
		{"tag the proxy has", fakeJWT(`{"Mesh":"payments","Tags":{"team":["payments","core"]}}`), ""},
		{"tag the proxy lacks", fakeJWT(`{"Tags":{"kuma.io/service":["legacy"]}}`), "token requires the label kuma.io/service"},
		{"tag with a value not allowed", fakeJWT(`{"Tags":{"team":["billing"]}}`), `allows label team only as one of ["billing"], but this proxy has team=payments`},
		{"tag the control plane sets", fakeJWT(`{"Tags":{"kuma.io/zone":["zone-1"]}}`), ""},
		{"token wrapped over lines", fakeJWT(`{"Mesh":"payments"}`)[:30] + "\n" + fakeJWT(`{"Mesh":"payments"}`)[30:], "line break"},
		{"not a JWT", "garbage", "not a JWT"},
		{"header without alg", base64.RawURLEncoding.EncodeToString([]byte(`{}`)) + ".e30.x", "alg"},
		{"claims not JSON", fakeJWT(`nope`), "claim"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.raw + "\n")
			if err == nil {
				err = c.Check("payments", "zp-1", "zp-egress", map[string]string{"team": "payments", "kuma.io/workload": "zp-egress"},
					func(k string) bool { return k == "kuma.io/zone" })
			}
			if te := c.CheckTime(now); err == nil && te != nil {
				err = te
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.raw) && len(tc.raw) > 8 {
				t.Fatal("error repeats the token")
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		return path
	}
	good := fakeJWT(`{"Mesh":"payments"}`)
	cases := []struct {
		name, inline, path string
		mesh               string
		mode               os.FileMode
		err                error
	}{
		{name: "file", path: write("ok", good+"\n", 0o640), mesh: "payments", mode: 0o640},
		{name: "inline", inline: good, mesh: "payments"},
		{name: "the file wins", inline: "ignored", path: write("ok2", good, 0o600), mesh: "payments", mode: 0o600},
		{name: "empty file", path: write("empty", " \n", 0o600), mode: 0o600, err: ErrEmpty},
		{name: "not a JWT", path: write("bad", "garbage", 0o600), mode: 0o600, err: ErrNotJWT},
		{name: "directory", path: dir, err: ErrNotRegular},
		{name: "missing", path: filepath.Join(dir, "none"), err: fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(tc.inline, tc.path)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if got.Claims.Mesh != tc.mesh || got.Mode != tc.mode {
				t.Errorf("mesh %q mode %04o, want %q %04o", got.Claims.Mesh, got.Mode, tc.mesh, tc.mode)
			}
			if err == nil && got.Raw != good {
				t.Errorf("raw %q", got.Raw)
			}
		})
	}
}
