package token

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A token file is read only when it is a regular file, and never beyond
// MaxFileSize: a pipe, a device or a directory is refused at once without
// being read, whatever waits or never ends behind it.
func TestReadFileRefusesWhatIsNoTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := fakeJWT(`{"Mesh":"payments"}`)
	regular := filepath.Join(dir, "token")
	if err := os.WriteFile(regular, []byte(good+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	linkToFifo := filepath.Join(dir, "link-to-fifo")
	if err := os.Symlink(fifo, linkToFifo); err != nil {
		t.Fatal(err)
	}
	linkToToken := filepath.Join(dir, "link-to-token")
	if err := os.Symlink(regular, linkToToken); err != nil {
		t.Fatal(err)
	}
	atCap := filepath.Join(dir, "at-cap")
	if err := os.WriteFile(atCap, []byte(good+strings.Repeat(" ", MaxFileSize-len(good))), 0o600); err != nil {
		t.Fatal(err)
	}
	overCap := filepath.Join(dir, "over-cap")
	if err := os.WriteFile(overCap, []byte(good+strings.Repeat(" ", MaxFileSize-len(good)+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse") // 1 TB without a byte on disk
	if f, err := os.Create(sparse); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(1 << 40); err != nil {
		f.Close()
		t.Skipf("no sparse file here: %v", err)
	} else {
		f.Close()
	}
	pipeR, pipeW, err := os.Pipe() // what <(…) hands over
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pipeR.Close(); pipeW.Close() })
	if _, err := pipeW.WriteString(good); err != nil {
		t.Fatal(err)
	}
	procSubst := "/proc/self/fd/" + strconv.Itoa(int(pipeR.Fd()))

	cases := []struct {
		name, path string
		err        error
		says       string
	}{
		{"regular file", regular, nil, ""},
		{"symbolic link to the token file", linkToToken, nil, ""},
		{"exactly the cap", atCap, nil, ""},
		{"one byte over the cap", overCap, ErrTooLarge, "65537 bytes or more, more than the 64 KiB"},
		{"1 TB sparse file", sparse, ErrTooLarge, "more than the 64 KiB"},
		{"/dev/zero", "/dev/zero", ErrNotRegular, "a character device, not a regular file"},
		{"named pipe without a writer", fifo, ErrNotRegular, "a named pipe (FIFO), not a regular file"},
		{"symbolic link to a named pipe", linkToFifo, ErrNotRegular, "a named pipe (FIFO)"},
		{"process substitution", procSubst, ErrNotRegular, "a named pipe (FIFO)"},
		{"directory", dir, ErrNotRegular, "a directory, not a regular file"},
		{"missing", filepath.Join(dir, "none"), fs.ErrNotExist, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var tok string
			var err error
			go func() {
				defer close(done)
				tok, err = ReadFile(tc.path)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadFile blocks")
			}
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err == nil && tok != good {
				t.Errorf("token %q", tok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%q does not say %q", err, tc.says)
			}
		})
	}
	// The pipe was not consumed: whoever reads it next still gets it all.
	_ = pipeW.Close()
	buf := make([]byte, len(good)+1)
	if n, _ := pipeR.Read(buf); string(buf[:n]) != good {
		t.Errorf("the pipe was read: %q left", buf[:n])
	}
}

// ReadRaw is bounded as ReadFile is, and keeps the whitespace.
func TestReadRaw(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(" tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRaw(path); err != nil || string(b) != " tok\n" {
		t.Errorf("%q %v", b, err)
	}
	if _, err := ReadRaw("/dev/zero"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero: %v", err)
	}
}

// Load reports the file's owner and group, for the warnings about who
// else can read it.
func TestLoadReportsOwnership(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(fakeJWT(`{}`)), 0o640); err != nil {
		t.Fatal(err)
	}
	c, err := Load("", path)
	if err != nil {
		t.Fatal(err)
	}
	if c.File.UID != os.Geteuid() || c.File.GID < 0 || c.File.Mode != c.Mode {
		t.Errorf("file %+v, mode %04o; euid %d", c.File, c.Mode, os.Geteuid())
	}
}

// What the file becomes between the checks is checked again: a regular
// file replaced by a pipe after it was looked at neither holds the open
// up nor is read; one that grows after its size was taken is read no
// further than the cap.
func TestReadFileRechecksWhatItOpened(t *testing.T) {
	good := fakeJWT(`{"Mesh":"payments"}`)
	cases := []struct {
		name string
		at   string
		race func(path string) error
		err  error
	}{
		{"replaced by a named pipe", "stat", func(path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return syscall.Mkfifo(path, 0o600)
		}, ErrNotRegular},
		{"grown past the cap", "fstat", func(path string) error {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString(strings.Repeat(" ", 1<<20))
			return err
		}, ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
				t.Fatal(err)
			}
			raceHook = func(step, p string) {
				if step == tc.at && p == path {
					if err := tc.race(p); err != nil {
						t.Error(err)
					}
				}
			}
			t.Cleanup(func() { raceHook = func(string, string) {} })
			done := make(chan error, 1)
			go func() { _, err := ReadFile(path); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ReadFile blocks")
			}
		})
	}
}
