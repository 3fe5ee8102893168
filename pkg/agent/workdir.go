package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

// File names inside the work dir. The admin socket name is the control
// plane's choice; the agent only removes a stale one.
const (
	lockFile      = "zoneproxy.lock"
	bootstrapFile = "bootstrap.yaml"
	tokenFile     = "dataplane-token"
	adminSocket   = "kuma-envoy-admin.sock"
)

// workDir is the agent's private directory, locked for one agent at a time.
type workDir struct {
	path      string
	temporary bool
	lock      *os.File
	// leftBootstrap: an earlier agent left its bootstrap behind, so it was
	// killed outright and its Envoy may still run.
	leftBootstrap bool
}

// openWorkDir creates (0700) and locks dir, or a private temp dir when dir
// is empty. An existing dir is used only if it is this user's and nobody
// else can write it: the agent never changes the mode of a directory it did
// not create. Files left by an agent that was killed are removed.
func openWorkDir(dir string) (*workDir, error) {
	w := &workDir{path: dir}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "zoneproxy-")
		if err != nil {
			return nil, classify(fmt.Errorf("cannot create a temporary work dir: %w; set --work-dir", errtext.PathCause(err)))
		}
		w.path, w.temporary = tmp, true
	} else if err := ensureOwnDir(dir); err != nil {
		return nil, err
	}
	if err := w.acquire(); err != nil {
		w.removeTemp()
		return nil, err
	}
	for _, name := range []string{bootstrapFile, tokenFile, adminSocket} {
		if err := os.Remove(w.file(name)); err == nil && name == bootstrapFile {
			w.leftBootstrap = true
		}
	}
	return w, nil
}

// ensureOwnDir creates dir with mode 0700, or checks that an existing one
// is a directory owned by this user and writable by nobody else.
func ensureOwnDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return classify(fmt.Errorf("cannot create work dir %s: %w; set --work-dir to a writable directory", dir, errtext.PathCause(err)))
		}
		return nil
	}
	if err != nil {
		return classify(fmt.Errorf("cannot use work dir %s: %w", dir, errtext.PathCause(err)))
	}
	if err := privateDir(dir, fi); err != nil {
		return exitcode.AsConfig(err)
	}
	if owner, ok := ownerUID(fi); ok && owner != os.Geteuid() {
		return exitcode.AsConfig(fmt.Errorf("work dir %s is owned by uid %d, not by this user (uid %d): give the zone proxy a directory of its own with --work-dir (the systemd unit uses $RUNTIME_DIRECTORY)", dir, owner, os.Geteuid()))
	}
	return nil
}

// privateDir: an existing work dir must be a directory nobody else can
// write to.
func privateDir(dir string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return fmt.Errorf("work dir %s is not a directory; set --work-dir to a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("work dir %s is writable by other users (mode %04o): the agent does not change a directory it did not create; use a private directory (mode 0700) with --work-dir, e.g. a new one it can create", dir, perm)
	}
	return nil
}

func ownerUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// CheckWorkDir says, changing nothing, whether run could use dir: nil and
// a description when it could, else why not. The owner is reported, not
// judged: `check` may run as another user than the service.
func CheckWorkDir(dir string) (string, error) {
	if dir == "" {
		return "none set: a temporary one is made at every start", nil
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		for {
			if _, err := os.Stat(parent); err == nil || parent == filepath.Dir(parent) {
				break
			}
			parent = filepath.Dir(parent)
		}
		if err := syscall.Access(parent, 0o3); err != nil { // W_OK|X_OK
			return "", fmt.Errorf("cannot create work dir %s: %s is not writable by this user (%v); set --work-dir to a writable directory", dir, parent, err)
		}
		return dir + " does not exist yet; run creates it (mode 0700)", nil
	}
	if err != nil {
		return "", fmt.Errorf("cannot use work dir %s: %w", dir, errtext.PathCause(err))
	}
	if err := privateDir(dir, fi); err != nil {
		return "", err
	}
	desc := dir + " is private"
	if owner, ok := ownerUID(fi); ok && owner != os.Geteuid() {
		desc += fmt.Sprintf(" (owned by uid %d: run must run as that user)", owner)
	}
	return desc, nil
}

// acquire locks the work dir. The lock file is unlinked on cleanup, so an
// agent that locked a file which was unlinked meanwhile retries on the one
// now at the path: two agents never hold locks on different inodes.
func (w *workDir) acquire() error {
	path := w.file(lockFile)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return classify(fmt.Errorf("work dir %s is not writable: %w; set --work-dir to a directory this user can write", w.path, errtext.PathCause(err)))
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			owner, _ := os.ReadFile(path)
			f.Close()
			pid := strings.TrimSpace(string(owner))
			if pid == "" {
				pid = "unknown"
			}
			return exitcode.AsConfig(fmt.Errorf("work dir %s is in use by another zoneproxy (pid %s); give each zone proxy its own --work-dir", w.path, pid))
		}
		if !samePath(f, path) {
			f.Close() // lost a race with the previous holder's cleanup
			continue
		}
		if err := f.Truncate(0); err == nil {
			if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
				f.Close()
				return classify(fmt.Errorf("cannot write in work dir %s: %w", w.path, errtext.PathCause(err)))
			}
		}
		w.lock = f
		return nil
	}
}

// samePath reports whether f is still the file at path.
func samePath(f *os.File, path string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(open, now)
}

func (w *workDir) file(name string) string { return filepath.Join(w.path, name) }

// write creates name with mode 0600 (it may hold the token).
func (w *workDir) write(name string, data []byte) (string, error) {
	path := w.file(name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		_ = os.Remove(tmp)
		return "", classify(fmt.Errorf("cannot write %s: %w", path, errtext.PathCause(err)))
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return "", classify(fmt.Errorf("cannot write %s: %w", path, errtext.PathCause(err)))
	}
	return path, nil
}

// cleanup removes what the agent wrote and releases the lock: unlink while
// still holding it, then close (see acquire).
func (w *workDir) cleanup() {
	for _, name := range []string{bootstrapFile, tokenFile, adminSocket} {
		_ = os.Remove(w.file(name))
	}
	if w.lock != nil {
		_ = os.Remove(w.file(lockFile))
		w.lock.Close()
	}
	w.removeTemp()
}

func (w *workDir) removeTemp() {
	if w.temporary {
		_ = os.RemoveAll(w.path)
	}
}

// transientIO are the I/O failures a restart (or an operator freeing disk
// space) can cure: systemd should keep trying.
var transientIO = []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE}

// classify marks a file-system error as a configuration problem (exit 78),
// unless it is one a restart may cure (exit 1).
func classify(err error) error {
	if ioTransient(err) {
		return err
	}
	return exitcode.AsConfig(err)
}

func ioTransient(err error) bool {
	for _, e := range transientIO {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
