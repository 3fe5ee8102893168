package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// The new program's side of a reload: run's story, with what the previous
// program handed over taken at each step instead of made anew. With an
// Envoy handed over, nothing that Envoy uses is touched: the work dir is
// not cleaned, no leftover Envoy is looked for, Envoy's ports are not
// checked, no bootstrap is fetched, and Envoy is adopted, not started.
// Without one (the previous program waited for the mesh or the control
// plane), the new program starts over on the handed-over dirs and
// listeners.

// takeHandover reads what the previous program handed over
// (Options.Handover), first thing in run.
func (a *Agent) takeHandover() error {
	r := &a.rl
	exe, args := startedAs()
	r.hmu.Lock()
	r.exe, r.args = exe, args
	r.hmu.Unlock()
	r.record.Started()
	r.record.Register(a.opts.Metrics.Register)
	if a.opts.Handover == nil {
		return nil
	}
	taken, err := upgrade.Take(a.opts.Handover)
	if err != nil {
		return err
	}
	st := &taken.State
	r.hmu.Lock()
	r.taken = taken
	r.hmu.Unlock()
	r.record.Reloaded(st, time.Now())
	a.hand.results.Carry(st.Handovers)
	generation, envoyGeneration, _ := r.record.Generations()
	if st.Envoy != nil {
		// /ready answers READY from the first request the new program
		// serves: Envoy never stopped serving.
		a.tracker.Set(state.Ready, fmt.Sprintf("reloaded: agent generation %d took over the running Envoy (pid %d)", generation, st.Envoy.PID))
		a.log.Info("reloaded: taking over the running Envoy", zap.Int("generation", generation),
			zap.Int("envoy-generation", envoyGeneration), zap.Int("envoy-pid", st.Envoy.PID))
	} else {
		a.log.Info("reloaded: no Envoy ran yet; starting over", zap.Int("generation", generation))
	}
	return nil
}

// startedAs is how this program was started, its path resolved now: the
// path a reload runs, the new binary after a package upgrade.
func startedAs() (string, []string) {
	exe := os.Args[0]
	if filepath.Base(exe) == exe {
		if p, err := exec.LookPath(exe); err == nil {
			exe = p
		}
	}
	if abs, err := filepath.Abs(exe); err == nil {
		exe = abs
	}
	return exe, append([]string(nil), os.Args...)
}

// openWorkDir takes the handed-over work dir, or opens it as a fresh
// start does.
func (a *Agent) openWorkDir() (*workDir, error) {
	wd, err := a.adoptWorkDir()
	if wd == nil && err == nil {
		wd, err = openWorkDir(a.cfg.WorkDir)
	}
	if err == nil {
		a.rl.hmu.Lock()
		a.rl.wd = wd
		a.rl.hmu.Unlock()
	}
	return wd, err
}

func (a *Agent) adoptWorkDir() (*workDir, error) {
	t := a.rl.taken
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
	if want := a.cfg.WorkDir; (want == "") != w.temporary || (want != "" && absPath(want) != w.path) {
		w.cleanup() // moved by the new configuration; no Envoy runs there
		return nil, nil
	}
	for _, name := range []string{bootstrapFile, tokenFile, adminSocket} {
		_ = d.Remove(name) // what a fresh start removes; no Envoy runs yet
	}
	return w, nil
}

// adoptStateDir takes the handed-over state dir; ok false: open it as a
// fresh start does.
func (a *Agent) adoptStateDir() (*stateDir, bool, error) {
	d, lock, handed, err := a.rl.taken.LockedDir(upgrade.FileStateDir, upgrade.FileStateLock, func(st *upgrade.State) string { return st.StateDir })
	if !handed || err != nil {
		return nil, handed, err
	}
	sd := &stateDir{dir: d, lock: lock}
	if a.cfg.StateDir == "" || absPath(a.cfg.StateDir) != d.Path() {
		sd.close() // moved or dropped by the new configuration
		return nil, false, nil
	}
	return sd, true, nil
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return filepath.Clean(abs)
	}
	return p
}

// listen takes the handed-over listener of p, if it listens on p's
// address still, or listens anew: a changed --readiness-port moves.
func (a *Agent) listen(p preflight.Port) (net.Listener, error) {
	ln := a.rl.taken.Listener(p.Flag, p.Addr)
	var err error
	if ln == nil {
		ln, err = preflight.Listen(p.Addr)
	}
	if err == nil {
		a.rl.keepListener(p.Flag, ln)
	}
	return ln, err
}
