package agent

import (
	"errors"
	"fmt"
	"os"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
)

// File names inside the work dir. The admin socket name is the control
// plane's choice; the agent only removes a stale one.
const (
	bootstrapFile = "bootstrap.yaml"
	tokenFile     = "dataplane-token"
	adminSocket   = "kuma-envoy-admin.sock"
)

// ownFiles are the agent's files in the work dir: slot B's are a
// handover's new Envoy's.
var ownFiles = []string{bootstrapFile, tokenFile, adminSocket, upgrade.SlotBBootstrapFile, upgrade.SlotBAdminSocket}

// workDir is the agent's private directory, held open and locked for one
// agent at a time (pkg/host/securedir): it and the directories above it are
// ones nobody else can change, and the agent's own files, sockets and
// FIFO are made through the open directory.
type workDir struct {
	dir       *securedir.Dir
	path      string
	temporary bool
	lock      *os.File
	// leftBootstrap: an earlier agent left its bootstrap behind, so it was
	// killed outright and its Envoy may still run.
	leftBootstrap bool
}

// openWorkDir creates (0700), opens and locks dir, or a private temp dir
// when dir is empty. An existing dir is used only if it is this user's,
// nobody else can write it, and every directory above it belongs to root
// or this user and is written by nobody else (or is sticky, like /tmp):
// the agent never changes the mode of a directory it did not create.
// Files left by an agent that was killed are removed.
func openWorkDir(dir string) (*workDir, error) {
	w := &workDir{path: dir}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "zoneproxy-")
		if err != nil {
			return nil, classify(fmt.Errorf("cannot create a temporary work dir: %w; set %s", errtext.PathCause(err), config.KeyWorkDir.Flag()))
		}
		w.path, w.temporary = tmp, true
	}
	d, err := securedir.Open(w.path, config.KeyWorkDir.Flag(), true)
	if err != nil {
		w.removeTemp()
		return nil, dirError(err)
	}
	w.dir, w.path = d, d.Path()
	if w.lock, err = d.Lock(); err != nil {
		d.Close()
		w.removeTemp()
		if errors.Is(err, securedir.ErrLocked) {
			return nil, exitcode.AsConfig(fmt.Errorf("work dir %s is %w; give each zone proxy its own %s", w.path, err, config.KeyWorkDir.Flag()))
		}
		return nil, classify(fmt.Errorf("work dir %s is not writable: %w; set %s to a directory this user can write", w.path, errtext.PathCause(err), config.KeyWorkDir.Flag()))
	}
	for _, name := range ownFiles {
		if err := d.Remove(name); err == nil && (name == bootstrapFile || name == upgrade.SlotBBootstrapFile) {
			w.leftBootstrap = true
		}
	}
	return w, nil
}

// dirError: an untrusted directory is the configuration's to fix (78);
// an I/O failure may pass.
func dirError(err error) error {
	if errors.Is(err, securedir.ErrUntrusted) {
		return exitcode.AsConfig(err)
	}
	return classify(errtext.PathCause(err))
}

// CheckWorkDir says, changing nothing, whether run could use dir: nil and
// a description when it could, else why not. The owner is reported, not
// judged: `check` may run as another user than the service.
func CheckWorkDir(dir string) (string, error) {
	if dir == "" {
		return "none set: a temporary one is made at every start", nil
	}
	desc, err := securedir.Check(dir, config.KeyWorkDir.Flag())
	if err != nil {
		return "", err
	}
	return desc, nil
}

// file is name's path in the work dir, for Envoy and the control plane.
func (w *workDir) file(name string) string { return w.dir.Join(name) }

// at names name through the open work dir, for the agent's own binds.
func (w *workDir) at(name string) string { return w.dir.At(name) }

// write creates name with mode 0600 (it may hold the token), atomically
// and never through a link; it returns the path Envoy is given.
func (w *workDir) write(name string, data []byte) (string, error) {
	if err := w.dir.WriteFile(name, data, 0o600); err != nil {
		return "", classify(fmt.Errorf("cannot write %s: %w", w.file(name), errtext.PathCause(err)))
	}
	return w.file(name), nil
}

// cleanup removes what the agent wrote and releases the lock.
func (w *workDir) cleanup() {
	for _, name := range ownFiles {
		_ = w.dir.Remove(name)
	}
	w.dir.Unlock(w.lock)
	w.dir.Close()
	w.removeTemp()
}

func (w *workDir) removeTemp() {
	if w.temporary {
		_ = os.RemoveAll(w.path)
	}
}

// classify marks a file-system error as a configuration problem (exit 78),
// unless it is one a restart may cure (exit 1).
func classify(err error) error { return exitcode.FromIO(err) }

// openWorkDir takes the handed-over work dir, or opens it as a fresh
// start does.
func (a *Agent) openWorkDir() (*workDir, error) {
	wd, err := adoptWorkDir(a.up.Taken(), a.cfg.WorkDir)
	if wd == nil && err == nil {
		wd, err = openWorkDir(a.cfg.WorkDir)
	}
	if err == nil {
		a.up.KeepWorkDir(upgrade.Dir{Path: wd.path, File: wd.dir.File(), Lock: wd.lock}, wd.temporary)
	}
	return wd, err
}

// adoptWorkDir is the work dir t hands over; nil when none, or when the
// configuration moved it (want) and no Envoy runs there.
func adoptWorkDir(t *upgrade.Taken, want string) (*workDir, error) {
	d, lock, handed, err := t.LockedDir(upgrade.FileWorkDir, upgrade.FileWorkLock, func(st *upgrade.State) string { return st.WorkDir })
	switch {
	case !handed && t.AdoptsEnvoy():
		return nil, errors.New("the previous agent handed over a running Envoy without its work dir")
	case !handed || err != nil:
		return nil, err
	}
	w := &workDir{dir: d, path: d.Path(), temporary: t.State.Temporary, lock: lock}
	if t.AdoptsEnvoy() {
		return w, nil
	}
	if (want == "") != w.temporary || (want != "" && inplace.Moved(want, w.path)) {
		w.cleanup() // moved by the new configuration; no Envoy runs there
		return nil, nil
	}
	for _, name := range []string{bootstrapFile, tokenFile, adminSocket} {
		_ = d.Remove(name) // what a fresh start removes; no Envoy runs yet
	}
	return w, nil
}
