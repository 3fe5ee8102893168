package agent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
	"github.com/zoneproxy/zoneproxy/pkg/host/sdnotify"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// A reload replaces the agent's program in place (`zoneproxy reload`,
// POST /reload, `systemctl reload`, SIGHUP under systemd): the binary the
// agent was started as, the new one after a package upgrade, runs in the
// same process with the same arguments and environment, so Envoy stays its
// child and never stops. The new program is checked first; one that cannot
// take over leaves this one serving, with the reason (pkg/upgrade).

// ReloadStatus is the last reload: the one that started this program, or
// one it refused or failed.
type ReloadStatus = upgrade.ReloadStatus

// ErrReloadRefused wraps every reason a reload is not done.
var ErrReloadRefused = upgrade.ErrReloadRefused

// Reload checks the new program and readies the handover; exec then
// replaces this program (it returns only if that fails). Neither touches
// Envoy. The error says why a reload is refused, for the one who asked.
func (a *Agent) Reload() (exec func() error, err error) {
	a.awaitReloadable()
	r := &a.rl
	if !r.mu.TryLock() {
		err := upgrade.Refused("a reload, or Envoy's start, is under way; try again once /status shows it done")
		a.reloadEnded(upgrade.ResultRefused, err)
		return nil, err
	}
	defer func() {
		if err != nil {
			r.mu.Unlock()
			a.reloadEnded(upgrade.ResultRefused, err)
		}
	}()
	withEnvoy, err := a.reloadable()
	if err != nil {
		return nil, err
	}
	if err := a.checkNewProgram(); err != nil {
		return nil, err
	}
	st, files, err := upgrade.Gather(a.holdings(withEnvoy))
	if err != nil {
		return nil, upgrade.CannotReload{Err: fmt.Errorf("%w: %w", ErrReloadRefused, err)}
	}
	return func() error {
		defer r.mu.Unlock()
		// A stop or a drain asked while the new program was checked goes
		// first: it would be lost across the exec. It is asked once more
		// just before the exec; one whose signal comes in the microseconds
		// after that is still lost.
		gaveWay := func() error {
			if r.stopAsked.Load() || a.maint.want.Load() {
				return upgrade.Refused(fmt.Sprintf("a stop or a maintenance drain was asked meanwhile; the agent (generation %d) does that instead", r.record.Generation()))
			}
			return nil
		}
		err, result := gaveWay(), upgrade.ResultRefused
		if err == nil {
			if err = a.replace(st, files, gaveWay); !errors.Is(err, ErrReloadRefused) {
				result = upgrade.ResultFailed
			}
		}
		files.CloseDups()
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
		if !errors.As(err, new(upgrade.StartUnderWay)) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reloadable says whether a reload may happen now, and with Envoy or
// before it starts.
func (a *Agent) reloadable() (withEnvoy bool, err error) {
	r := &a.rl
	r.hmu.Lock()
	started := r.wd != nil && r.listeners != nil
	r.hmu.Unlock()
	c := upgrade.Conditions{Phase: a.tracker.Current().Phase, Started: started, StopAsked: r.stopAsked.Load(),
		DrainAsked: a.maint.want.Load(), Serving: a.maint.serving.Load(), RetiringPID: a.hand.retiring.Draining()}
	if e := a.sup.Now(); e != nil {
		_, c.Adoptable = e.Proc.(*envoy.Process)
		c.EnvoyStarted, c.EnvoyExited = true, e.Proc.Exited()
	}
	return upgrade.Reloadable(c)
}

// holdings are what a reload hands over; the cache is written out first,
// so the new program serves Envoy the configuration it holds.
func (a *Agent) holdings(withEnvoy bool) upgrade.Holdings {
	r := &a.rl
	r.hmu.Lock()
	defer r.hmu.Unlock()
	gen, envoyGen, _ := r.record.Generations()
	h := upgrade.Holdings{Generation: gen, EnvoyGeneration: envoyGen,
		WorkDir:          upgrade.Dir{Path: r.wd.path, File: r.wd.dir.File(), Lock: r.wd.lock},
		TemporaryWorkDir: r.wd.temporary, Listeners: r.listeners, Reloads: r.record.Reloads(), Handovers: a.hand.results.Snapshot()}
	if r.sd != nil {
		h.StateDir = &upgrade.Dir{Path: r.sd.dir.Path(), File: r.sd.dir.File(), Lock: r.sd.lock}
	}
	if !withEnvoy {
		return h
	}
	proc := a.sup.Now().Proc.(*envoy.Process)
	place := a.hand.serving()
	e := &upgrade.HeldEnvoy{Output: proc.Output(), State: upgrade.EnvoyState{PID: proc.PID(), Path: r.envoyPath, Version: r.envoyVer,
		HandoverGeneration: place.Generation, Slot: place.Slot, Launch: r.envoyLaunch}}
	if r.feature != nil && r.feature.Relayed() {
		e.State.Relayed, e.State.Resume, e.Relay = true, r.feature.Resumption(), r.relayLn
	}
	if o := r.obs; o != nil {
		e.AccessLog, e.MeshMetric = o.accessLog.FIFO(), o.hijacker.File
	}
	if r.cache != nil {
		e.Flush = r.cache.Flush
	}
	h.Envoy = e
	return h
}

// replace execs the new program on the process thread; it returns only
// if that failed, this program whole.
func (a *Agent) replace(st *upgrade.State, files upgrade.HandedFiles, proceed func() error) error {
	r := &a.rl
	gen := r.record.Generation()
	envoyPID := 0
	if st.Envoy != nil {
		envoyPID = st.Envoy.PID
	}
	a.log.Info("reloading: replacing the agent in place; Envoy keeps running",
		zap.String("binary", r.exe), zap.Int("generation", gen), zap.Int("next-generation", gen+1), zap.Int("envoy-pid", envoyPID))
	_, _ = sdnotify.Notify(sdnotify.Reloading, sdnotify.Field{Name: "MONOTONIC_USEC", Value: strconv.FormatInt(monotonicUsec(), 10)},
		sdnotify.Status(fmt.Sprintf("reloading: agent generation %d replaces generation %d", gen+1, gen)))
	_ = a.log.Sync()
	var err error
	reexec.Do(func() { err = reexec.Exec(r.exe, r.args, os.Environ(), files.Open(), st, proceed) })
	if errors.Is(err, ErrReloadRefused) {
		_, _ = sdnotify.Notify(sdnotify.Ready, sdnotify.Status(a.tracker.Current().Verdict().Detail))
		return err
	}
	a.log.Error("reload failed; this agent goes on serving: "+err.Error(), zap.Int("generation", gen))
	snap := a.tracker.Current()
	_, _ = sdnotify.Notify(sdnotify.Ready, sdnotify.Status(snap.Verdict().Detail))
	return fmt.Errorf("the reload failed; the agent (generation %d) goes on serving: %w", gen, err)
}

// reloadEnded records a reload that did not happen.
func (a *Agent) reloadEnded(result string, err error) {
	if err == nil {
		return
	}
	a.rl.record.Ended(result, err, time.Now())
	if result == upgrade.ResultRefused {
		a.log.Error("reload refused; this agent goes on serving: "+err.Error(), zap.Int("generation", a.rl.record.Generation()))
	}
}
