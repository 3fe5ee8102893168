package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
	"github.com/zoneproxy/zoneproxy/pkg/host/sdnotify"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// A reload replaces the agent's program in place (`zoneproxy reload`,
// POST /reload, `systemctl reload`, SIGHUP under systemd): the binary the
// agent was started as, the new one after a package upgrade, runs in the
// same process with the same arguments and environment, so Envoy stays its
// child and never stops. The new program is checked first; one that cannot
// take over leaves this one serving, with the reason.

// Reload results, the label of zoneproxy_reloads_total.
const (
	reloadOK      = "ok"      // the new program serves
	reloadRefused = "refused" // not now, or the new binary or configuration cannot take over
	reloadFailed  = "failed"  // the replacement itself failed; this program serves on
)

// ReloadStatus is the last reload: the one that started this program, or
// one it refused or failed.
type ReloadStatus struct {
	Result string    `json:"result"`
	Error  string    `json:"error,omitempty"`
	At     time.Time `json:"at"`
}

// ErrReloadRefused wraps every reason a reload is not done.
var ErrReloadRefused = errors.New("reload refused")

// Reload checks the new program and readies the handover; exec then
// replaces this program (it returns only if that fails). Neither touches
// Envoy. The error says why a reload is refused, for the one who asked.
func (a *Agent) Reload() (exec func() error, err error) {
	a.awaitReloadable()
	r := &a.rl
	if !r.mu.TryLock() {
		err := fmt.Errorf("%w: a reload, or Envoy's start, is under way; try again once /status shows it done", ErrReloadRefused)
		a.reloadEnded(reloadRefused, err)
		return nil, err
	}
	defer func() {
		if err != nil {
			r.mu.Unlock()
			a.reloadEnded(reloadRefused, err)
		}
	}()
	withEnvoy, err := a.reloadable()
	if err != nil {
		return nil, err
	}
	if err := a.checkNewProgram(); err != nil {
		return nil, err
	}
	st, files, err := a.handoverOf(withEnvoy)
	if err != nil {
		return nil, cannotReload{fmt.Errorf("%w: %w", ErrReloadRefused, err)}
	}
	return func() error {
		defer r.mu.Unlock()
		// A stop or a drain asked while the new program was checked goes
		// first: it would be lost across the exec. It is asked once more
		// just before the exec; one whose signal comes in the microseconds
		// after that is still lost.
		gaveWay := func() error {
			if r.stopAsked.Load() || a.maint.want.Load() {
				return fmt.Errorf("%w: a stop or a maintenance drain was asked meanwhile; the agent (generation %d) does that instead", ErrReloadRefused, r.generation)
			}
			return nil
		}
		err, result := gaveWay(), reloadRefused
		if err == nil {
			if err = a.replace(st, files, gaveWay); errors.Is(err, ErrReloadRefused) {
				result = reloadRefused
			} else {
				result = reloadFailed
			}
		}
		closeFiles(dupsOf(files)...)
		a.reloadEnded(result, err)
		return err
	}, nil
}

// reloadStartWait bounds how long a reload waits for a start under way
// (the agent's own, or Envoy's way to LIVE) before it is refused: a
// reload that comes right after another, as a package upgrade's and a
// config manager's SIGHUP may, finds the new program still adopting Envoy.
var reloadStartWait = 10 * time.Second

// awaitReloadable waits while the only reason to refuse a reload is a
// start under way. It holds the reload lock only to look (Envoy's start
// takes it), and does not wait behind a reload that holds it.
func (a *Agent) awaitReloadable() {
	r := &a.rl
	deadline := time.Now().Add(reloadStartWait)
	for time.Now().Before(deadline) {
		if !r.mu.TryLock() {
			return
		}
		_, err := a.reloadable()
		r.mu.Unlock()
		if !errors.As(err, new(startUnderWay)) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cannotReload is a refusal no later reload lifts: this agent cannot hand
// over to the new program at all, and only a restart brings it in.
type cannotReload struct{ err error }

func (e cannotReload) Error() string { return e.err.Error() }
func (e cannotReload) Unwrap() error { return e.err }

// CannotReload tells POST /reload to answer so (localserver.HandleReload).
func (cannotReload) CannotReload() bool { return true }

// startUnderWay is a refusal that a short wait may lift.
type startUnderWay struct{ err error }

func (e startUnderWay) Error() string { return e.err.Error() }
func (e startUnderWay) Unwrap() error { return e.err }

// reloadable says whether a reload may happen now, and with Envoy or
// before it starts.
func (a *Agent) reloadable() (withEnvoy bool, err error) {
	refuse := func(why string) (bool, error) { return false, fmt.Errorf("%w: %s", ErrReloadRefused, why) }
	starting := func(why string) (bool, error) {
		return false, startUnderWay{fmt.Errorf("%w: %s", ErrReloadRefused, why)}
	}
	r := &a.rl
	snap := a.tracker.Current()
	r.hmu.Lock()
	ready := r.wd != nil && r.listeners != nil
	r.hmu.Unlock()
	e := a.envoyNow.Load()
	switch {
	case !ready:
		return starting("the agent is still starting; reload once /ready answers")
	case r.stopAsked.Load() || snap.Phase == state.Terminating || snap.Phase == state.Stopped || snap.Phase == state.Failed:
		return refuse("the agent is stopping")
	case a.maint.want.Load() || snap.Phase == state.Draining || snap.Phase == state.Drained:
		return refuse("the proxy is drained or draining for maintenance; reload after `zoneproxy undrain`, or restart it")
	case e == nil && (snap.Phase == state.Starting || snap.Phase == state.WaitingForMesh || snap.Phase == state.WaitingForControlPlane):
		return false, nil // no Envoy yet: the new program starts over
	case e == nil || e.proc.Exited() || !a.maint.serving.Load():
		return starting(fmt.Sprintf("Envoy is starting (%s); reload once /ready says READY", snap.Phase))
	case a.hand.draining.Load() != 0:
		return refuse(fmt.Sprintf("an Envoy handover's old Envoy (pid %d) still drains; reload once it exited", a.hand.draining.Load()))
	}
	if _, ok := e.proc.(*envoy.Process); !ok {
		return false, cannotReload{fmt.Errorf("%w: this Envoy cannot be handed over; restart instead", ErrReloadRefused)}
	}
	return true, nil
}

// handedFile is a file to hand over; dup marks one made for the handover,
// closed if it fails.
type handedFile struct {
	f   *os.File
	dup bool
}

// handoverOf gathers the state and the files; the cache is written out
// first, so the new program serves Envoy the configuration it holds.
func (a *Agent) handoverOf(withEnvoy bool) (*handoverState, map[string]handedFile, error) {
	r := &a.rl
	r.hmu.Lock()
	defer r.hmu.Unlock()
	files := map[string]handedFile{}
	fail := func(err error) (*handoverState, map[string]handedFile, error) {
		closeFiles(dupsOf(files)...)
		return nil, nil, err
	}
	st := &handoverState{Version: HandoverVersion, Generation: r.generation, EnvoyGeneration: r.envoyGeneration,
		WorkDir: r.wd.path, Temporary: r.wd.temporary, Reloads: r.reloads.snapshot(), Handovers: a.hand.results.snapshot()}
	files[fileWorkDir] = handedFile{f: r.wd.dir.File()}
	files[fileWorkLock] = handedFile{f: r.wd.lock}
	if r.sd != nil {
		st.StateDir = r.sd.dir.Path()
		files[fileStateDir] = handedFile{f: r.sd.dir.File()}
		files[fileStateLock] = handedFile{f: r.sd.lock}
	}
	for name, ln := range r.listeners {
		f, err := listenerFile(ln)
		if err != nil {
			return fail(fmt.Errorf("cannot hand over the %s listener: %w", name, err))
		}
		files[name] = handedFile{f: f, dup: true}
	}
	if !withEnvoy {
		return st, files, nil
	}
	e := a.envoyNow.Load()
	proc := e.proc.(*envoy.Process)
	out := proc.Output()
	if out == nil {
		return fail(errors.New("Envoy's output cannot be handed over"))
	}
	files[fileEnvoyOutput] = handedFile{f: out}
	eh := &envoyHandover{PID: proc.PID(), Path: r.envoyPath, Version: r.envoyVer, HandoverGeneration: a.hand.generation.Load(), Launch: r.envoyLaunch}
	if r.feature != nil && r.feature.Relayed() {
		eh.Relayed, eh.Resume = true, r.feature.Resumption()
		f, err := listenerFile(r.relayLn)
		if err != nil {
			return fail(fmt.Errorf("cannot hand over the relay's socket: %w", err))
		}
		files[fileRelay] = handedFile{f: f, dup: true}
	}
	if o := r.obs; o != nil {
		files[fileAccessLog] = handedFile{f: o.accessLog.FIFO()}
		f, err := o.hijacker.File()
		if err != nil {
			return fail(fmt.Errorf("cannot hand over the MeshMetric socket: %w", err))
		}
		files[fileMeshMetric] = handedFile{f: f, dup: true}
	}
	st.Envoy = eh
	if r.cache != nil && eh.Relayed {
		if err := r.cache.Flush(); err != nil {
			return fail(fmt.Errorf("the last-known-good configuration the new program would serve Envoy cannot be written: %w", err))
		}
	}
	return st, files, nil
}

func listenerFile(ln net.Listener) (*os.File, error) {
	fl, ok := ln.(interface{ File() (*os.File, error) })
	if !ok || ln == nil {
		return nil, errors.New("not a socket")
	}
	return fl.File()
}

func dupsOf(files map[string]handedFile) []*os.File {
	var out []*os.File
	for _, h := range files {
		if h.dup {
			out = append(out, h.f)
		}
	}
	return out
}

// replace execs the new program on the process thread; it returns only
// if that failed, this program whole.
func (a *Agent) replace(st *handoverState, files map[string]handedFile, proceed func() error) error {
	r := &a.rl
	fs := make(map[string]*os.File, len(files))
	for name, h := range files {
		fs[name] = h.f
	}
	envoyPID := 0
	if st.Envoy != nil {
		envoyPID = st.Envoy.PID
	}
	a.log.Info("reloading: replacing the agent in place; Envoy keeps running",
		zap.String("binary", r.exe), zap.Int("generation", r.generation), zap.Int("next-generation", r.generation+1), zap.Int("envoy-pid", envoyPID))
	_, _ = sdnotify.Notify(sdnotify.Reloading, sdnotify.Field{Name: "MONOTONIC_USEC", Value: strconv.FormatInt(monotonicUsec(), 10)},
		sdnotify.Status(fmt.Sprintf("reloading: agent generation %d replaces generation %d", r.generation+1, r.generation)))
	_ = a.log.Sync()
	var err error
	reexec.Do(func() { err = reexec.Exec(r.exe, r.args, os.Environ(), fs, st, proceed) })
	if errors.Is(err, ErrReloadRefused) {
		_, _ = sdnotify.Notify(sdnotify.Ready, sdnotify.Status(a.tracker.Current().Verdict().Detail))
		return err
	}
	a.log.Error("reload failed; this agent goes on serving: "+err.Error(), zap.Int("generation", r.generation))
	snap := a.tracker.Current()
	_, _ = sdnotify.Notify(sdnotify.Ready, sdnotify.Status(snap.Verdict().Detail))
	return fmt.Errorf("the reload failed; the agent (generation %d) goes on serving: %w", r.generation, err)
}

// reloadEnded records a reload that did not happen.
func (a *Agent) reloadEnded(result string, err error) {
	if err == nil {
		return
	}
	r := &a.rl
	r.reloads.add(result, 1)
	r.hmu.Lock()
	r.last = &ReloadStatus{Result: result, Error: err.Error(), At: a.now()}
	r.hmu.Unlock()
	if result == reloadRefused {
		a.log.Error("reload refused; this agent goes on serving: "+err.Error(), zap.Int("generation", r.generation))
	}
}
