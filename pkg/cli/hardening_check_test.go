package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
)

// check says until when --ca-cert-file is valid, and fails one that is
// not valid now naming the file, the certificate and its date: never
// taken for the control plane's own certificate.
func TestCheckCAFileValidity(t *testing.T) {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	write := func(name string, pem []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	synced := func() timesync.Status { return timesync.Status{Synced: true} }
	unsynced := func() timesync.Status { return timesync.Status{} }
	cases := []struct {
		name   string
		path   string
		clock  timesync.Checker
		failed int
		want   []string
	}{
		{"valid", write("valid", testutil.CertPEM(t, now.Add(time.Hour))), synced, 0,
			[]string{"[ ok ] CA certificate file " + dir + "/valid: CA certificate \"zp\" valid until 2027-01-15T09:00:00Z"}},
		{"expired, clock not synchronised", write("expired", testutil.CertPEM(t, now.Add(-time.Hour))), unsynced, 1,
			[]string{"[FAIL] CA certificate file " + dir + "/expired is valid now",
				"--ca-cert-file: its CA certificate \"zp\" expired at 2027-01-15T07:00:00Z (the clock says 2027-01-15T08:00:00Z)",
				"the clock may be what is wrong"}},
		{"expired", write("expired2", testutil.CertPEM(t, now.Add(-time.Hour))), synced, 1,
			[]string{"expired at 2027-01-15T07:00:00Z", "(renew it: give the control plane's current CA certificate)"}},
		{"not valid yet", write("future", testutil.CertPEM(t, now.Add(72*time.Hour))), synced, 1,
			[]string{"is not valid before 2027-01-16T08:00:00Z", "run would keep retrying until it is valid"}},
		{"a device", "/dev/zero", synced, 1, []string{"[FAIL] CA certificate file /dev/zero", "cannot read it: it is a character device, not a regular file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &checklist{w: &out}
			c.checkCAFile(&config.Config{CACertFile: tc.path}, now, tc.clock)
			if c.failed != tc.failed {
				t.Errorf("%d failed, want %d", c.failed, tc.failed)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("check says %q, want %q", out.String(), w)
				}
			}
			if strings.Contains(out.String(), "control plane's certificate expired") {
				t.Errorf("blamed on the control plane: %q", out.String())
			}
		})
	}
}
