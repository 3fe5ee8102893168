package securedir

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherUID is a user other than the test's, for directories another user
// owns (nobody).
const otherUID = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
}

func mkdir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestOpenTrustsOnlyDirectoriesNobodyElseCanChange(t *testing.T) {
	tests := []struct {
		name    string
		root    bool // needs root (another user's directory)
		setup   func(t *testing.T, base string) string
		create  bool
		wantErr string
	}{
		{"missing, created 0700", false, func(t *testing.T, base string) string { return filepath.Join(base, "a", "wd") }, true, ""},
		{"missing, not created", false, func(t *testing.T, base string) string { return filepath.Join(base, "wd") }, false, "no such file"},
		{"own and private", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "wd"), 0o700)
			return filepath.Join(base, "wd")
		}, false, ""},
		{"own, written by others", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "wd"), 0o777)
			return filepath.Join(base, "wd")
		}, false, "is writable by other users (mode 0777)"},
		{"parent written by others", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "shared"), 0o777)
			return filepath.Join(base, "shared", "wd")
		}, true, "which is writable by other users (mode 0777)"},
		{"sticky parent, like /tmp", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "tmp"), os.ModeSticky|0o777)
			return filepath.Join(base, "tmp", "wd")
		}, true, ""},
		{"a link in a trusted directory", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "real"), 0o700)
			if err := os.Symlink("real", filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "link")
		}, false, ""},
		{"a link in a directory others write", false, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "real"), 0o700)
			mkdir(t, filepath.Join(base, "shared"), 0o777)
			if err := os.Symlink("../real", filepath.Join(base, "shared", "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "shared", "link")
		}, false, "which is writable by other users"},
		{"another user's directory", true, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "wd"), 0o700)
			if err := os.Chown(filepath.Join(base, "wd"), otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "wd")
		}, false, "is owned by uid 65534, not by this user"},
		{"inside another user's directory", true, func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "theirs", "wd"), 0o700)
			if err := os.Chown(filepath.Join(base, "theirs"), otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "theirs", "wd")
		}, false, "which is owned by uid 65534: that user could replace it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t)
			}
			base := t.TempDir()
			path := tt.setup(t, base)
			d, err := Open(path, "--work-dir", tt.create)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(tt.wantErr, "other users") || strings.Contains(tt.wantErr, "uid") {
					if !errors.Is(err, ErrUntrusted) {
						t.Fatalf("%v is not ErrUntrusted", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			fi, err := os.Stat(path)
			if err != nil || !fi.IsDir() {
				t.Fatalf("%s: %v %v", path, fi, err)
			}
			if tt.create && fi.Mode().Perm() != 0o700 {
				t.Fatalf("created with mode %04o", fi.Mode().Perm())
			}
		})
	}
}

// Files are made, bound and removed through the open directory: a link
// put in its place is never followed, and renaming the path away does not
// redirect the agent.
func TestFilesGoThroughTheOpenDirectory(t *testing.T) {
	base := t.TempDir()
	d, err := Open(filepath.Join(base, "wd"), "--work-dir", true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, d.Join("bootstrap.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenFile("bootstrap.yaml", os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
		t.Fatal("opened through a link")
	}
	if err := d.WriteFile("bootstrap.yaml", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the link's target was written: %q", b)
	}
	if fi, err := os.Lstat(d.Join("bootstrap.yaml")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap.yaml: %v %v", fi, err)
	}

	// The path moves away and another directory takes its place: the
	// agent's socket still lands in its own directory.
	if err := os.Rename(d.Path(), filepath.Join(base, "moved")); err != nil {
		t.Fatal(err)
	}
	mkdir(t, d.Path(), 0o700)
	ln, err := net.Listen("unix", d.At("xds.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := os.Lstat(filepath.Join(base, "moved", "xds.sock")); err != nil {
		t.Fatalf("socket not in the open directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(d.Path(), "xds.sock")); err == nil {
		t.Fatal("socket bound in the directory now at the path")
	}
	if err := d.Remove("xds.sock"); err != nil {
		t.Fatal(err)
	}
}

// A subdirectory is trusted like the directory: never a link, this
// user's; one of this user's made private.
func TestSubRefusesLinksAndOtherUsersDirectories(t *testing.T) {
	tests := []struct {
		name    string
		root    bool
		setup   func(t *testing.T, parent, elsewhere string)
		wantErr string
	}{
		{"missing, created", false, func(*testing.T, string, string) {}, ""},
		{"own, too open, tightened", false, func(t *testing.T, parent, _ string) { mkdir(t, filepath.Join(parent, "xds"), 0o755) }, ""},
		{"a link to elsewhere", false, func(t *testing.T, parent, elsewhere string) {
			if err := os.Symlink(elsewhere, filepath.Join(parent, "xds")); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory (a link or a file)"},
		{"another user's", true, func(t *testing.T, parent, _ string) {
			mkdir(t, filepath.Join(parent, "xds"), 0o777)
			if err := os.Chown(filepath.Join(parent, "xds"), otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t)
			}
			base := t.TempDir()
			elsewhere := filepath.Join(base, "elsewhere")
			mkdir(t, elsewhere, 0o755)
			d, err := Open(filepath.Join(base, "state"), "--state-dir", true)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			tt.setup(t, d.Path(), elsewhere)
			sub, err := d.Sub("xds", "--state-dir", true, true)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				if fi, _ := os.Stat(elsewhere); fi.Mode().Perm() != 0o755 {
					t.Fatalf("the link's target was changed to %04o", fi.Mode().Perm())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if fi, err := os.Stat(sub.Path()); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("%v %v", fi, err)
			}
		})
	}
}

// The agent's next program takes over the open directory and its lock;
// another agent still finds it locked.
func TestAdoptKeepsTheDirectoryAndItsLock(t *testing.T) {
	base := t.TempDir()
	d, err := Open(filepath.Join(base, "work"), "--work-dir", true)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := d.Lock()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Adopt(d.File(), d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AdoptLock(lock); err != nil {
		t.Fatal(err)
	}
	other, err := Open(d.Path(), "--work-dir", false)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Lock(); !errors.Is(err, ErrLocked) {
		t.Fatalf("another agent locked it: %v", err)
	}
	if _, err := Adopt(d.File(), base); err == nil {
		t.Fatal("adopted under another directory's path")
	}
	stray, err := other.OpenFile("stray", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	if _, err := a.AdoptLock(stray); err == nil {
		t.Fatal("adopted a file that is not the lock as the lock")
	}
}
