package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
}

// openWorkDir creates (0700) and locks dir, or a private temp dir when dir
// is empty. Files left by an agent that was killed are removed.
func openWorkDir(dir string) (*workDir, error) {
	w := &workDir{path: dir}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "zoneproxy-")
		if err != nil {
			return nil, fmt.Errorf("cannot create a temporary work dir: %w; set --work-dir", err)
		}
		w.path, w.temporary = tmp, true
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create work dir %s: %v; set --work-dir to a writable directory", dir, unwrap(err))
	}
	if fi, err := os.Stat(w.path); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("work dir %s is not a directory; set --work-dir to a directory", w.path)
	}
	if err := os.Chmod(w.path, 0o700); err != nil {
		return nil, fmt.Errorf("cannot restrict work dir %s to mode 0700: %v", w.path, unwrap(err))
	}
	if err := w.acquire(); err != nil {
		w.removeTemp()
		return nil, err
	}
	for _, name := range []string{bootstrapFile, tokenFile, adminSocket} {
		_ = os.Remove(w.file(name))
	}
	return w, nil
}

func (w *workDir) acquire() error {
	path := w.file(lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("work dir %s is not writable: %v; set --work-dir to a directory this user can write", w.path, unwrap(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		pid := strings.TrimSpace(string(owner))
		if pid == "" {
			pid = "unknown"
		}
		return fmt.Errorf("work dir %s is in use by another zoneproxy (pid %s); give each zone proxy its own --work-dir", w.path, pid)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return fmt.Errorf("cannot write in work dir %s: %v", w.path, unwrap(err))
		}
	}
	w.lock = f
	return nil
}

func (w *workDir) file(name string) string { return filepath.Join(w.path, name) }

// write creates name with mode 0600 (it may hold the token).
func (w *workDir) write(name string, data []byte) (string, error) {
	path := w.file(name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("cannot write %s: %v", path, unwrap(err))
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("cannot write %s: %v", path, unwrap(err))
	}
	return path, nil
}

// cleanup removes what the agent wrote and releases the lock.
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

func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
