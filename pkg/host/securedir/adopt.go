package securedir

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// File is the open directory, to hand to the agent's next program
// (pkg/host/reexec); d keeps owning it.
func (d *Dir) File() *os.File { return d.f }

// Adopt takes over a directory an earlier program of this process opened,
// checked and handed over, as d.File: it is not walked again. path is the
// path it was opened as; it must still name the same directory, so that
// what the agent tells Envoy (Join) is where it writes (At).
func Adopt(f *os.File, path string) (*Dir, error) {
	var open, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &open); err != nil {
		return nil, fmt.Errorf("the handed-over directory %s: %w", path, err)
	}
	if open.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("the handed-over %s is not a directory", path)
	}
	if err := unix.Stat(path, &named); err != nil || named.Ino != open.Ino || named.Dev != open.Dev {
		return nil, fmt.Errorf("%s no longer names the directory the agent holds (moved or replaced?)", path)
	}
	return &Dir{path: path, f: f}, nil
}

// AdoptLock takes over the lock an earlier program of this process took
// (Lock) and handed over: the lock belongs to the open file, which the
// exec kept, so it is still held. It is refused unless it is d's lock file.
func (d *Dir) AdoptLock(f *os.File) (*os.File, error) {
	var open unix.Stat_t
	now, err := d.Lstat(LockFile)
	if err == nil {
		err = unix.Fstat(int(f.Fd()), &open)
	}
	if err != nil || open.Ino != now.Ino || open.Dev != now.Dev {
		return nil, fmt.Errorf("the handed-over lock is not %s's lock file", d.path)
	}
	// Flock on a file this process holds locked already succeeds at once;
	// on one another process holds, it fails: then the lock was lost.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("%s is %w", d.path, ErrLocked)
	}
	return f, nil
}
