package inplace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// Reload checks the new program and readies the handover; exec then
// replaces this program (it returns only if that fails). Neither touches
// Envoy. The error says why a reload is refused, for the one who asked.
func (u *Upgrades) Reload() (exec func() error, err error) {
	u.awaitReloadable()
	if !u.mu.TryLock() {
		err := upgrade.Refused("a reload, or Envoy's start, is under way; try again once /status shows it done")
		u.reloadEnded(upgrade.ResultRefused, err)
		return nil, err
	}
	defer func() {
		if err != nil {
			u.mu.Unlock()
			u.reloadEnded(upgrade.ResultRefused, err)
		}
	}()
	withEnvoy, err := u.reloadable()
	if err != nil {
		return nil, err
	}
	if err := u.checkNewProgram(); err != nil {
		return nil, err
	}
	st, files, err := upgrade.Gather(u.holdings(withEnvoy))
	if err != nil {
		return nil, upgrade.CannotReload{Err: fmt.Errorf("%w: %w", upgrade.ErrReloadRefused, err)}
	}
	return func() error {
		defer u.mu.Unlock()
		// A stop or a drain asked while the new program was checked goes
		// first: it would be lost across the exec. It is asked once more
		// just before the exec; one whose signal comes in the microseconds
		// after that is still lost.
		gaveWay := func() error {
			if u.stopAsked.Load() || u.h.Drained() {
				return upgrade.Refused(fmt.Sprintf("a stop or a maintenance drain was asked meanwhile; the agent (generation %d) does that instead", u.record.Generation()))
			}
			return nil
		}
		err, result := gaveWay(), upgrade.ResultRefused
		if err == nil {
			if err = u.replace(st, files, gaveWay); !errors.Is(err, upgrade.ErrReloadRefused) {
				result = upgrade.ResultFailed
			}
		}
		files.CloseDups()
		u.reloadEnded(result, err)
		return err
	}, nil
}

// ReloadOnSignal is SIGHUP's reload under systemd.
func (u *Upgrades) ReloadOnSignal() {
	u.h.Log.Info("SIGHUP: reloading the agent in place", zap.String("signal", "hangup"))
	exec, err := u.Reload()
	if err != nil {
		return // logged and counted by Reload
	}
	_ = exec()
}

// reloadStartWait bounds how long a reload waits for a start under way
// (the agent's own, or Envoy's way to LIVE) before it is refused: a
// reload that comes right after another, as a package upgrade's and a
// config manager's SIGHUP may, finds the new program still adopting Envoy.
var reloadStartWait = 10 * time.Second

// awaitReloadable waits while the only reason to refuse a reload is a
// start under way. It holds the reload lock only to look (Envoy's start
// takes it), and does not wait behind a reload that holds it.
func (u *Upgrades) awaitReloadable() {
	deadline := time.Now().Add(reloadStartWait)
	for time.Now().Before(deadline) {
		if !u.mu.TryLock() {
			return
		}
		_, err := u.reloadable()
		u.mu.Unlock()
		if !errors.As(err, new(upgrade.StartUnderWay)) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reloadable says whether a reload may happen now, and with Envoy or
// before it starts.
func (u *Upgrades) reloadable() (withEnvoy bool, err error) {
	u.hmu.Lock()
	started := u.held.workDir != nil && u.held.listeners != nil
	u.hmu.Unlock()
	c := upgrade.Conditions{Phase: u.h.Tracker.Current().Phase, Started: started, StopAsked: u.stopAsked.Load(),
		DrainAsked: u.h.Drained(), Serving: u.h.Serving(), RetiringPID: u.retiring.Draining()}
	if e := u.h.Sup.Now(); e != nil {
		_, c.Adoptable = e.Proc.(*envoy.Process)
		c.EnvoyStarted, c.EnvoyExited = true, e.Proc.Exited()
	}
	return upgrade.Reloadable(c)
}

// checkNewProgram runs the new binary with this program's arguments and
// environment and --handover-check (upgrade.CheckProgram), and judges its
// answer: with Envoy running, a configuration that changes what the
// proxy is needs a restart.
func (u *Upgrades) checkNewProgram() error {
	c, err := upgrade.CheckProgram(u.exe, u.args)
	if err != nil {
		return err
	}
	var identity func(next map[string]string) []string
	if u.h.Sup.Now() != nil { // else the new program starts over on the new configuration
		identity = func(next map[string]string) []string { return identityChanges(EnvoyFixed(u.h.Config), next) }
	}
	return c.Verdict(identity)
}

// replace execs the new program on the process thread; it returns only
// if that failed, this program whole.
func (u *Upgrades) replace(st *upgrade.State, files upgrade.HandedFiles, proceed func() error) error {
	gen := u.record.Generation()
	envoyPID := 0
	if st.Envoy != nil {
		envoyPID = st.Envoy.PID
	}
	log := u.h.Log
	log.Info("reloading: replacing the agent in place; Envoy keeps running",
		zap.String("binary", u.exe), zap.Int("generation", gen), zap.Int("next-generation", gen+1), zap.Int("envoy-pid", envoyPID))
	_, _ = sdnotify.Notify(sdnotify.Reloading, sdnotify.Field{Name: "MONOTONIC_USEC", Value: strconv.FormatInt(monotonicUsec(), 10)},
		sdnotify.Status(fmt.Sprintf("reloading: agent generation %d replaces generation %d", gen+1, gen)))
	_ = log.Sync()
	var err error
	reexec.Do(func() { err = reexec.Exec(u.exe, u.args, os.Environ(), files.Open(), st, proceed) })
	if errors.Is(err, upgrade.ErrReloadRefused) {
		_, _ = sdnotify.Notify(sdnotify.Ready, sdnotify.Status(u.h.Tracker.Current().Verdict().Detail))
		return err
	}
	log.Error("reload failed; this agent goes on serving: "+err.Error(), zap.Int("generation", gen))
	snap := u.h.Tracker.Current()
	_, _ = sdnotify.Notify(sdnotify.Ready, sdnotify.Status(snap.Verdict().Detail))
	return fmt.Errorf("the reload failed; the agent (generation %d) goes on serving: %w", gen, err)
}

// reloadEnded records a reload that did not happen.
func (u *Upgrades) reloadEnded(result string, err error) {
	if err == nil {
		return
	}
	u.record.Ended(result, err, time.Now())
	if result == upgrade.ResultRefused {
		u.h.Log.Error("reload refused; this agent goes on serving: "+err.Error(), zap.Int("generation", u.record.Generation()))
	}
}

// monotonicUsec is CLOCK_MONOTONIC in µs, which RELOADING=1 carries.
func monotonicUsec() int64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return int64(f * 1e6)
}
