package lkgcache

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
)

// Status describes the cache in a state dir, for `zoneproxy check`.
type Status struct {
	Path          string
	Present       bool
	Identity      Identity // what the cache was made for
	IdentityMatch bool
	WrittenAt     time.Time
	Age           time.Duration
	// EarliestNotAfter is the first certificate expiry in it (zero: none).
	EarliestNotAfter time.Time
	Resources        int
	// Problem says why the cache would not be served ("" if it would).
	Problem string
}

// Inspect reads the cache in the state dir without changing anything.
func Inspect(dir string, id Identity, maxAge time.Duration, now time.Time) Status {
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	st := Status{Path: filepath.Join(dir, SubDir, FileName)}
	// What run would refuse to serve from is not judged further.
	if _, err := securedir.Check(dir, config.KeyStateDir.Flag()); err != nil {
		st.Problem = err.Error()
		return st
	}
	data, err := readNoFollow(filepath.Join(dir, SubDir), FileName)
	if errors.Is(err, fs.ErrNotExist) {
		st.Problem = "no cache yet"
		return st
	}
	if err != nil {
		st.Problem = err.Error()
		return st
	}
	st.Present = true
	s, err := decodeBounded(data)
	if err != nil {
		st.Problem = "damaged: " + err.Error()
		return st
	}
	st.Identity, st.IdentityMatch = s.Identity, s.Identity == id
	st.WrittenAt, st.Age = s.WrittenAt, s.Age(now)
	for _, t := range s.Types {
		st.Resources += len(t.Resources)
	}
	st.EarliestNotAfter, _ = s.EarliestNotAfter()
	switch {
	case !st.IdentityMatch:
		st.Problem = "made for another proxy or control plane"
	default:
		if err := Judge(s, now, maxAge); err != nil {
			st.Problem = err.Error()
		}
	}
	return st
}

// readNoFollow reads name in dir, following a link in neither.
func readNoFollow(dir, name string) ([]byte, error) {
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(d)
	fd, err := unix.Openat(d, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(maxFileBytes)+1))
}
