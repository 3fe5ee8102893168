package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An instance's NAME.env (and NAME.yaml) that is no plain file of
// variables: a link to a secret is never quoted, a device never read to
// its end, a FIFO never waited on.
func TestOddInstanceFiles(t *testing.T) {
	const secret = "root:$6$hash-of-the-root-password:19000"
	cases := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"link to a secret", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "shadow")
			must(t, os.WriteFile(target, []byte("www-data:*:20228:0:99999:7:::\n"+secret+"\n"), 0o600))
			must(t, os.Symlink(target, path))
		}, "is not KEY=VALUE lines"},
		{"/dev/zero", func(t *testing.T, path string) { must(t, os.Symlink("/dev/zero", path)) }, "a character device, not a regular file"},
		{"FIFO", func(t *testing.T, path string) { must(t, syscall.Mkfifo(path, 0o600)) }, "a named pipe (FIFO), not a regular file"},
		{"directory", func(t *testing.T, path string) { must(t, os.Mkdir(path, 0o700)) }, "a directory, not a regular file"},
		{"too large", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte(strings.Repeat("A=b\n", maxConfigFile/4+1)), 0o600))
		}, "more than the 64 KiB"}, // more than a --config file may hold too
	}
	for _, tc := range cases {
		for _, file := range []string{"env", "yaml"} {
			t.Run(tc.name+" "+file, func(t *testing.T) {
				dir := t.TempDir()
				if file == "env" {
					must(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("mesh: m\n"), 0o600))
				}
				path := filepath.Join(dir, "a."+file)
				tc.make(t, path)
				done := make(chan error, 1)
				go func() {
					var err error
					if file == "env" {
						_, _, err = instanceFiles(dir, "a")
					} else {
						_, err = readConfigFile(path)
					}
					done <- err
				}()
				var err error
				select {
				case err = <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("reading it hangs")
				}
				if err == nil {
					if file == "yaml" && tc.name == "link to a secret" {
						return // read as YAML it is checked, and quoted by no one, later
					}
					t.Fatal("no error")
				}
				if strings.Contains(err.Error(), "hash-of-the-root-password") {
					t.Errorf("the error quotes the file: %v", err)
				}
				if file == "env" && !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q lacks %q", err, tc.want)
				}
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
