package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// An instance's NAME.env or NAME.yaml that is a link to a secret, a
// device or a FIFO: status names the file and what it is, quotes none of
// it, and neither runs out of memory nor hangs (harness.Run fails a run
// that does not end).
func TestStatusWithOddInstanceFiles(t *testing.T) {
	t.Parallel()
	const secret = "root:$6$hash-of-the-root-password:19000"
	cases := []struct {
		name, file string
		make       func(t *testing.T, path string) error
		want       string
	}{
		{"env links to a secret", "env", func(t *testing.T, path string) error {
			target := filepath.Join(t.TempDir(), "shadow")
			if err := os.WriteFile(target, []byte("www-data:*:20228:0:99999:7:::\n"+secret+"\n"), 0o600); err != nil {
				return err
			}
			return os.Symlink(target, path)
		}, "a.env is not KEY=VALUE lines"},
		{"env is /dev/zero", "env", func(_ *testing.T, path string) error { return os.Symlink("/dev/zero", path) }, "it is a character device, not a regular file"},
		{"env is a FIFO", "env", func(_ *testing.T, path string) error { return syscall.Mkfifo(path, 0o600) }, "it is a named pipe (FIFO), not a regular file"},
		{"yaml is /dev/zero", "yaml", func(_ *testing.T, path string) error { return os.Symlink("/dev/zero", path) }, "it is a character device, not a regular file"},
		{"yaml is a FIFO", "yaml", func(_ *testing.T, path string) error { return syscall.Mkfifo(path, 0o600) }, "it is a named pipe (FIFO), not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.file == "env" {
				if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("mesh: payments\nrole: egress\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.make(t, filepath.Join(dir, "a."+tc.file)); err != nil {
				t.Fatal(err)
			}
			code, out := harness.Run(t, bins.Zoneproxy, nil, "status", "--instance-dir", dir, "--instance", "a")
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 1 and %q:\n%s", code, tc.want, out)
			}
			if strings.Contains(out, "hash-of-the-root-password") || strings.Contains(out, "www-data") {
				t.Errorf("status quotes the file:\n%s", out)
			}
		})
	}
}
