package agent

import (
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
)

// stateDir is the state dir, locked for one agent: two agents sharing one
// would overwrite each other's last-known-good configuration, and only one
// of them could serve from it in an outage.
type stateDir struct {
	dir  *securedir.Dir
	lock *os.File
}

// openStateDir opens and locks --state-dir. One that another user could
// change, or that another agent holds, is the configuration's to fix (78):
// what is in it is served to Envoy. One the file system refuses (read-only
// under the unit's sandbox, full) leaves the agent without a cache, as
// before: a warning, and nil.
func (a *Agent) openStateDir() (*stateDir, error) {
	if sd, ok, err := adoptStateDir(a.up.Taken(), a.cfg.StateDir); ok {
		return sd, err
	}
	if a.cfg.StateDir == "" {
		return nil, nil
	}
	d, err := securedir.Open(a.cfg.StateDir, config.KeyStateDir.Flag(), true)
	if errors.Is(err, securedir.ErrUntrusted) {
		return nil, exitcode.AsConfig(fmt.Errorf("%w; the state dir holds the configuration served to Envoy while the control plane is away", err))
	}
	if err != nil {
		a.log.Warn("cannot use the state dir; running without a last-known-good configuration and without a record of Envoy's version",
			zap.String("state-dir", a.cfg.StateDir), zap.Error(errtext.PathCause(err)))
		return nil, nil
	}
	lock, err := d.Lock()
	if errors.Is(err, securedir.ErrLocked) {
		d.Close()
		return nil, exitcode.AsConfig(fmt.Errorf("state dir %s is %w; give each zone proxy its own %s (the systemd unit gives each instance /var/lib/zoneproxy/<instance>)", d.Path(), err, config.KeyStateDir.Flag()))
	}
	if err != nil {
		d.Close()
		a.log.Warn("cannot lock the state dir; running without a last-known-good configuration",
			zap.String("state-dir", a.cfg.StateDir), zap.Error(errtext.PathCause(err)))
		return nil, nil
	}
	return &stateDir{dir: d, lock: lock}, nil
}

func (s *stateDir) close() {
	if s == nil {
		return
	}
	s.dir.Unlock(s.lock)
	s.dir.Close()
}

// adoptStateDir takes the state dir t hands over; ok false: open it as a
// fresh start does (want, the configured one, moved it or none is handed).
func adoptStateDir(t *upgrade.Taken, want string) (*stateDir, bool, error) {
	d, lock, handed, err := t.LockedDir(upgrade.FileStateDir, upgrade.FileStateLock, func(st *upgrade.State) string { return st.StateDir })
	if !handed || err != nil {
		return nil, handed, err
	}
	sd := &stateDir{dir: d, lock: lock}
	if want == "" || inplace.Moved(want, d.Path()) {
		sd.close() // moved or dropped by the new configuration
		return nil, false, nil
	}
	return sd, true, nil
}
