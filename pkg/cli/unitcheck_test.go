package cli

import (
	"bytes"
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

const unitShown = `User=zoneproxy
ProtectHome=yes
ProtectSystem=strict
PrivateTmp=yes
ReadWritePaths=
InaccessiblePaths=
RuntimeDirectory=zoneproxy/payments-egress
StateDirectory=zoneproxy/payments-egress
`

// check --instance run as root judges the files as the unit will meet
// them: as its user and under its sandbox, not as root.
func TestCheckUnit(t *testing.T) {
	t.Setenv("RUNTIME_DIRECTORY", "")
	t.Setenv("STATE_DIRECTORY", "")
	origShow, origLookup, origAccess, origEUID := showUnit, lookupUser, accessAs, geteuid
	defer func() {
		showUnit, lookupUser, accessAs, geteuid = origShow, origLookup, origAccess, origEUID
		config.RunAs(os.Geteuid(), os.Getegid())
	}()
	showUnit = func(context.Context, string) ([]byte, error) { return []byte(unitShown), nil }
	lookupUser = func(name string) (*user.User, error) { return &user.User{Username: name, Uid: "998", Gid: "998"}, nil }
	base := func() *config.Config {
		return &config.Config{EnvoyBinary: "/bin/sh", DataplaneTokenFile: "/etc/zoneproxy/tokens/egress", CACertFile: "/etc/zoneproxy/ca.pem",
			WorkDir: "/run/zoneproxy/payments-egress", StateDir: "/var/lib/zoneproxy/payments-egress"}
	}
	for _, tc := range []struct {
		name     string
		euid     int
		cfg      func(*config.Config)
		denied   string // the path the unit's user cannot reach
		want     []string
		failures int
	}{
		{"all reachable", 0, func(*config.Config) {}, "", []string{"[ ok ] zoneproxy@payments-egress.service (user zoneproxy, its sandbox) can reach every file its configuration names"}, 0},
		{"a token only root reads", 0, func(*config.Config) {}, "/etc/zoneproxy/tokens/egress",
			[]string{"[FAIL] zoneproxy@payments-egress.service runs as zoneproxy, which cannot read --dataplane-token-file /etc/zoneproxy/tokens/egress", "chown root:zoneproxy and chmod 0640"}, 1},
		{"a CA file under /root", 0, func(c *config.Config) { c.CACertFile = "/root/ca.pem" }, "",
			[]string{"[FAIL] zoneproxy@payments-egress.service cannot read --ca-cert-file /root/ca.pem", "ProtectHome=yes hides /root from the unit: move it elsewhere (e.g. /etc/zoneproxy/)"}, 1},
		{"a token in /tmp", 0, func(c *config.Config) { c.DataplaneTokenFile = "/tmp/token" }, "",
			[]string{"PrivateTmp=yes gives the unit its own /tmp"}, 1},
		{"a work dir the sandbox keeps read-only", 0, func(c *config.Config) { c.WorkDir = "/srv/zoneproxy" }, "",
			[]string{"[FAIL] zoneproxy@payments-egress.service cannot write --work-dir /srv/zoneproxy", "ProtectSystem=strict", "ReadWritePaths=/srv/zoneproxy"}, 1},
		{"not root: the user is not checked", 1000, func(*config.Config) {}, "/etc/zoneproxy/tokens/egress",
			[]string{"[note] zoneproxy@payments-egress.service runs as zoneproxy: run `zoneproxy check --instance` as root"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			geteuid = func() int { return tc.euid }
			var asked []string
			accessAs = func(_ context.Context, u *user.User, flag, path string) bool {
				asked = append(asked, u.Username+flag+path)
				return path != tc.denied
			}
			cfg := base()
			tc.cfg(cfg)
			u := instanceUnit(context.Background(), "payments-egress")
			var out bytes.Buffer
			c := &checklist{w: &out}
			u.configFile = "/etc/zoneproxy/payments-egress.yaml"
			c.checkUnitOf(context.Background(), cfg, u)
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("lacks %q:\n%s", want, out.String())
				}
			}
			if c.failed != tc.failures {
				t.Errorf("%d failures, want %d:\n%s", c.failed, tc.failures, out.String())
			}
			if tc.euid == 0 && tc.failures == 0 && len(asked) < 4 {
				t.Errorf("asked the kernel about %v only", asked)
			}
		})
	}
}

func TestUnitNotReadable(t *testing.T) {
	t.Setenv("RUNTIME_DIRECTORY", "")
	t.Setenv("STATE_DIRECTORY", "")
	orig := showUnit
	defer func() { showUnit = orig }()
	showUnit = func(context.Context, string) ([]byte, error) {
		return nil, errString("systemctl show zoneproxy@x.service: System has not been booted with systemd")
	}
	var out bytes.Buffer
	c := &checklist{w: &out}
	c.checkUnitOf(context.Background(), &config.Config{}, instanceUnit(context.Background(), "x"))
	if !strings.Contains(out.String(), "[note] the unit's user and sandbox are not checked: systemctl show zoneproxy@x.service: System has not been booted with systemd") || c.failed != 0 {
		t.Errorf("got:\n%s", out.String())
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// The kernel's answer, as the unit's user: root reads a 0600 file of
// root's, nobody does not.
func TestAccessAsAsksTheKernel(t *testing.T) {
	if geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	if accessAs(context.Background(), nobody, "-r", secret) {
		t.Error("nobody reads a 0600 file of root's")
	}
	if err := os.Chmod(secret, 0o644); err != nil {
		t.Fatal(err)
	}
	if !accessAs(context.Background(), nobody, "-r", secret) {
		t.Error("nobody cannot read a 0644 file in 0755 directories")
	}
}
