package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

func TestWorkDirIsOursAndOnlyOurs(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T) string
		wantErr  string // "" = accepted
		wantMode os.FileMode
	}{
		{name: "created with mode 0700", setup: func(t *testing.T) string { return filepath.Join(t.TempDir(), "a", "b") }, wantMode: 0o700},
		{name: "an existing private dir is kept as it is", setup: func(t *testing.T) string { return mkdir(t, 0o700) }, wantMode: 0o700},
		{name: "an existing readable dir is not chmodded", setup: func(t *testing.T) string { return mkdir(t, 0o750) }, wantMode: 0o750},
		{name: "world-writable dir refused (like /tmp)", setup: func(t *testing.T) string { return mkdir(t, os.ModeSticky|0o777) }, wantErr: "writable by other users (mode 0777)", wantMode: os.ModeSticky | 0o777},
		{name: "group-writable dir refused", setup: func(t *testing.T) string { return mkdir(t, 0o770) }, wantErr: "writable by other users", wantMode: 0o770},
		{name: "a file is not a directory", setup: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, wantErr: "is not a directory", wantMode: 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t)
			w, err := openWorkDir(dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				w.cleanup()
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("err = %v, want it to name %s and say %q", err, dir, tt.wantErr)
				}
				if exitcode.Of(err) != exitcode.Config {
					t.Fatalf("exit %d, want 78", exitcode.Of(err))
				}
			}
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() & (os.ModePerm | os.ModeSticky); got != tt.wantMode {
				t.Fatalf("mode %v after opening, want %v", got, tt.wantMode)
			}
		})
	}
}

func TestWorkDirOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a directory owned by another user")
	}
	dir := mkdir(t, 0o700)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := openWorkDir(dir)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") || exitcode.Of(err) != exitcode.Config {
		t.Fatalf("err = %v (exit %d)", err, exitcode.Of(err))
	}
}

func mkdir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "wd")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return dir
}

// Two agents race for one work dir while the previous holder cleans up
// (unlinking the lock file): exactly one may hold it at a time.
func TestTwoAgentsRacingOnOneWorkDirNeverBothWin(t *testing.T) {
	dir := mkdir(t, 0o700)
	holder, err := openWorkDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 100 {
		var holders atomic.Int32
		var wg sync.WaitGroup
		won := make(chan *workDir, 2)
		start := make(chan struct{})
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					w, err := openWorkDir(dir)
					if err == nil {
						holders.Add(1)
						won <- w
						return
					}
					if !strings.Contains(err.Error(), "in use by another zoneproxy") {
						t.Errorf("round %d: %v", round, err)
						return
					}
					if holders.Load() > 0 {
						return // the other agent won; this one exits 78
					}
				}
			}()
		}
		close(start)
		holder.cleanup() // the previous agent stops while they race
		wg.Wait()
		close(won)
		var winners []*workDir
		for w := range won {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d agents hold the work dir", round, len(winners))
		}
		holder = winners[0]
	}
	holder.cleanup()
}

func TestWorkDirIOErrorsAreRestartable(t *testing.T) {
	tests := []struct {
		errno syscall.Errno
		want  int
	}{
		{syscall.ENOSPC, exitcode.Runtime},
		{syscall.EDQUOT, exitcode.Runtime},
		{syscall.EIO, exitcode.Runtime},
		{syscall.EROFS, exitcode.Runtime},
		{syscall.EACCES, exitcode.Config},
		{syscall.ENOTDIR, exitcode.Config},
	}
	for _, tt := range tests {
		err := classify(fmt.Errorf("cannot write /run/zp/bootstrap.yaml: %w", tt.errno))
		if got := exitcode.Of(err); got != tt.want {
			t.Errorf("%v: exit %d, want %d", tt.errno, got, tt.want)
		}
		if !errors.Is(err, tt.errno) || !strings.Contains(err.Error(), "/run/zp/bootstrap.yaml") {
			t.Errorf("%v: the error lost its path or cause: %v", tt.errno, err)
		}
	}
}

// check reports the work dir as run would meet it, changing nothing.
func TestCheckWorkDirAsRunWouldMeetIt(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, want string
		ok              bool
	}{
		{"none set", "", "temporary one", true},
		{"private", mk("private", 0o700), "is private", true},
		{"not there yet", filepath.Join(base, "new", "wd"), "run creates it", true},
		{"writable by others", mk("open", 0o777), "writable by other users (mode 0777)", false},
		{"writable by the group", mk("group", 0o770), "writable by other users (mode 0770)", false},
		{"a file", file, "is not a directory", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desc, err := CheckWorkDir(tc.dir)
			got := desc
			if err != nil {
				got = err.Error()
			}
			if (err == nil) != tc.ok || !strings.Contains(got, tc.want) {
				t.Fatalf("CheckWorkDir(%q) = %q, %v; want ok %v and %q", tc.dir, desc, err, tc.ok, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(base, "new")); !os.IsNotExist(err) {
		t.Errorf("check created %s/new: %v", base, err)
	}
}
