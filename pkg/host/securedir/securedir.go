// Package securedir opens a directory the agent may trust, and holds it.
// A directory is trusted when it belongs to this user and nobody else may
// write in it, and every directory above it belongs to root or this user
// and nobody else may write in it either (a sticky one, like /tmp, lets
// others add entries but not replace ours). Then nobody else can swap it,
// or anything in it, for a link of their own. Files are made, bound and
// removed relative to the open directory, never through its path again.
// It knows nothing of what the directory is for.
package securedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is an open trusted directory. Close it when done.
type Dir struct {
	path string
	f    *os.File
}

// ErrUntrusted marks a directory, or one above it, that another user
// could change: a configuration error.
var ErrUntrusted = errors.New("untrusted directory")

// maxLinks bounds the symbolic links followed while resolving a path.
const maxLinks = 40

// Open resolves path (links in it are followed only where they sit in a
// trusted directory), checks every directory on the way, creates what is
// missing with mode 0700 when create is set, and opens the last one. what
// names the setting in messages, e.g. "--work-dir".
func Open(path, what string, create bool) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	f, err := walk(abs, what, create, uint32(os.Geteuid()), false)
	if err != nil {
		return nil, err
	}
	return &Dir{path: abs, f: f}, nil
}

// Check says, changing nothing, whether Open would accept path when run
// as the user who owns it (or, for a directory not made yet, this user):
// a description, or why not.
func Check(path, what string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(abs, &st); errors.Is(err, unix.ENOENT) {
		parent := filepath.Dir(abs)
		for unix.Stat(parent, &st) != nil && parent != filepath.Dir(parent) {
			parent = filepath.Dir(parent)
		}
		if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
			return "", fmt.Errorf("cannot create %s %s: %s is not writable by this user (%v); set %s to a writable directory", what, abs, parent, err, what)
		}
		f, err := walk(parent, what, false, uint32(os.Geteuid()), true)
		if err != nil {
			return "", fmt.Errorf("%w (%s %s does not exist yet)", err, what, abs)
		}
		f.Close()
		return abs + " does not exist yet; run creates it (mode 0700)", nil
	} else if err != nil {
		return "", fmt.Errorf("cannot use %s %s: %w", what, abs, err)
	}
	f, err := walk(abs, what, false, st.Uid, false)
	if err != nil {
		return "", err
	}
	f.Close()
	desc := abs + " is private"
	if st.Uid != uint32(os.Geteuid()) {
		desc += fmt.Sprintf(" (owned by uid %d: run must run as that user)", st.Uid)
	}
	return desc, nil
}

// walk opens each component of abs from "/", without following links
// except those it resolves itself, for the user uid. The last is checked
// as the user's own directory, or as one above it when lastIsAncestor.
func walk(abs, what string, create bool, uid uint32, lastIsAncestor bool) (*os.File, error) {
	parts := splitPath(abs)
	cur, err := openDir(unix.AT_FDCWD, "/")
	if err != nil {
		return nil, fmt.Errorf("%s: cannot open /: %w", what, err)
	}
	walked := "/"
	links := 0
	for i := 0; i < len(parts); i++ {
		name := parts[i]
		if err := checkAncestor(cur, walked, what, abs, uid); err != nil {
			cur.Close()
			return nil, err
		}
		next, err := openDir(int(cur.Fd()), name)
		switch {
		case errors.Is(err, unix.ENOENT) && create:
			if err := unix.Mkdirat(int(cur.Fd()), name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				cur.Close()
				return nil, fmt.Errorf("%s %s: cannot create %s: %w", what, abs, filepath.Join(walked, name), err)
			}
			next, err = openDir(int(cur.Fd()), name)
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
			target, lerr := readlinkat(int(cur.Fd()), name)
			if lerr != nil {
				cur.Close()
				return nil, fmt.Errorf("%s %s: %s is not a directory", what, abs, filepath.Join(walked, name))
			}
			if links++; links > maxLinks {
				cur.Close()
				return nil, fmt.Errorf("%s %s: too many links", what, abs)
			}
			// The link sits in a directory checked already: follow it, and
			// check the way it leads from the top again.
			next := target
			if !filepath.IsAbs(target) {
				next = filepath.Join(walked, target)
			}
			parts = append(splitPath(next), parts[i+1:]...)
			cur.Close()
			if cur, err = openDir(unix.AT_FDCWD, "/"); err != nil {
				return nil, err
			}
			walked, i = "/", -1
			continue
		}
		if err != nil {
			cur.Close()
			return nil, fmt.Errorf("%s %s: cannot open %s: %w", what, abs, filepath.Join(walked, name), err)
		}
		cur.Close()
		cur, walked = next, filepath.Join(walked, name)
	}
	check := checkOwn(cur, walked, what, uid)
	if lastIsAncestor {
		check = checkAncestor(cur, walked, what, abs, uid)
	}
	if check != nil {
		cur.Close()
		return nil, check
	}
	return cur, nil
}

// splitPath splits a clean absolute path into its names.
func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(filepath.Clean(p), "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func openDir(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func stat(f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(int(f.Fd()), &st)
	return st, err
}

// checkAncestor: a directory above the one opened belongs to root or this
// user, and nobody else may write in it unless it is sticky.
func checkAncestor(f *os.File, path, what, target string, euid uint32) error {
	st, err := stat(f)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", what, path, err)
	}
	if st.Uid != 0 && st.Uid != euid {
		return fmt.Errorf("%w: %s %s is inside %s, which is owned by uid %d: that user could replace it; use a directory whose parents belong to root or to this user (uid %d)",
			ErrUntrusted, what, target, path, st.Uid, euid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("%w: %s %s is inside %s, which is writable by other users (mode %04o): they could replace it; use a directory whose parents only root or this user may change",
			ErrUntrusted, what, target, path, st.Mode&0o777)
	}
	return nil
}

// checkOwn: the directory itself belongs to this user and nobody else may
// write in it.
func checkOwn(f *os.File, path, what string, euid uint32) error {
	st, err := stat(f)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", what, path, err)
	}
	if st.Uid != euid {
		return fmt.Errorf("%w: %s %s is owned by uid %d, not by this user (uid %d): give the zone proxy a directory of its own",
			ErrUntrusted, what, path, st.Uid, euid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: %s %s is writable by other users (mode %04o): the agent does not change a directory it did not create; use a private directory (mode 0700), e.g. a new one it can create",
			ErrUntrusted, what, path, st.Mode&0o777)
	}
	return nil
}

// Path is the directory's path, for Envoy's configuration and messages.
func (d *Dir) Path() string { return d.path }

// Join is the path of name in the directory, for others (Envoy) to use.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// At names name through the open directory (/proc/self/fd/N/name): a path
// for the agent's own binds and opens that no later change of the
// directory's path can redirect. Valid while d is open.
func (d *Dir) At(name string) string {
	return "/proc/self/fd/" + strconv.Itoa(int(d.f.Fd())) + "/" + name
}

// Fd is the directory's descriptor, valid while d is open.
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// OpenFile opens name in the directory, never through a link.
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := unix.Openat(d.Fd(), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.Join(name), Err: err}
	}
	return os.NewFile(uintptr(fd), d.Join(name)), nil
}

// Remove unlinks name (a file, a socket or a FIFO) from the directory.
func (d *Dir) Remove(name string) error {
	if err := unix.Unlinkat(d.Fd(), name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	return nil
}

// Rename renames within the directory.
func (d *Dir) Rename(from, to string) error {
	if err := unix.Renameat(d.Fd(), from, d.Fd(), to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Join(from), New: d.Join(to), Err: err}
	}
	return nil
}

// Lstat describes name in the directory without following a link.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return st, &fs.PathError{Op: "lstat", Path: d.Join(name), Err: err}
	}
	return st, nil
}

// WriteFile writes data to name atomically (a temporary file renamed over
// it), with mode perm; never through a link.
func (d *Dir) WriteFile(name string, data []byte, perm os.FileMode) error {
	tmp := "." + name + ".tmp"
	_ = unix.Unlinkat(d.Fd(), tmp, 0)
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = d.Rename(tmp, name)
	}
	if werr != nil {
		_ = unix.Unlinkat(d.Fd(), tmp, 0)
	}
	return werr
}

// Sub opens (and with create, makes, mode 0700) the directory name inside
// d, never through a link, and checks it as Open checks its own: this
// user's, written by nobody else. One of this user's with a wider mode is
// made 0700 when private is set.
func (d *Dir) Sub(name, what string, create, private bool) (*Dir, error) {
	if create {
		if err := unix.Mkdirat(d.Fd(), name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("%s: cannot create %s: %w", what, d.Join(name), err)
		}
	}
	f, err := openDir(d.Fd(), name)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%w: %s: %s is not a directory (a link or a file): remove it", ErrUntrusted, what, d.Join(name))
		}
		return nil, fmt.Errorf("%s: cannot open %s: %w", what, d.Join(name), err)
	}
	st, err := stat(f)
	if err == nil && private && st.Uid == uint32(os.Geteuid()) && st.Mode&0o077 != 0 {
		err = unix.Fchmod(int(f.Fd()), 0o700)
	}
	if err == nil {
		err = checkOwn(f, d.Join(name), what, uint32(os.Geteuid()))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{path: d.Join(name), f: f}, nil
}

// Close releases the directory.
func (d *Dir) Close() error {
	if d == nil || d.f == nil {
		return nil
	}
	return d.f.Close()
}

// LockFile is the name of the lock an agent holds in its directories.
const LockFile = "zoneproxy.lock"

// ErrLocked: another process holds the directory's lock.
var ErrLocked = errors.New("in use by another zoneproxy")

// Lock takes the directory's lock (LockFile, holding this process's pid)
// for as long as the returned file is open; Unlock releases it. A lock
// file unlinked by its previous holder between open and flock is taken
// again at the path, so two processes never lock different files.
func (d *Dir) Lock() (*os.File, error) {
	for {
		f, err := d.OpenFile(LockFile, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			owner := make([]byte, 32)
			n, _ := f.ReadAt(owner, 0)
			f.Close()
			pid := strings.TrimSpace(string(owner[:n]))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%w (pid %s)", ErrLocked, pid)
		}
		var open unix.Stat_t
		now, serr := d.Lstat(LockFile)
		if unix.Fstat(int(f.Fd()), &open) != nil || serr != nil || open.Ino != now.Ino || open.Dev != now.Dev {
			f.Close() // lost a race with the previous holder's unlock
			continue
		}
		err = f.Truncate(0)
		if err == nil {
			_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		if err != nil {
			d.Unlock(f)
			return nil, err
		}
		return f, nil
	}
}

// Unlock removes the lock file while still holding it, then releases it.
func (d *Dir) Unlock(f *os.File) {
	if f == nil {
		return
	}
	_ = d.Remove(LockFile)
	f.Close()
}
