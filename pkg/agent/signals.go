package agent

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// Signals are the process's signals as the agent reads them:
//
//   - SIGTERM, SIGINT (Ctrl-C) and SIGHUP (the terminal or ssh session
//     closing) stop the agent with a drain; a second one skips the rest of
//     the drain. SIGHUP stays ignored when it was at start (nohup).
//   - SIGUSR1 stops it for a restart (restart.go): a zone egress stays in
//     kuma-cp's egress set. Under systemd the unit's job says so already.
//   - Under systemd (NOTIFY_SOCKET or INVOCATION_ID set) no terminal
//     closes: SIGHUP is a reload, as `zoneproxy reload` (pkg/upgrade/inplace).
//   - SIGUSR2 is a maintenance drain, as in kuma-dp; only `zoneproxy
//     undrain` ends it.
//   - SIGPIPE is ignored: a journald restart breaks stderr, and the next
//     log line would otherwise kill the agent, and so Envoy.
type Signals struct {
	stop        chan os.Signal
	maintenance chan os.Signal
	reload      chan os.Signal
}

// CatchSignals installs the agent's signal handling. `run` calls it before
// anything else: a signal that arrives while the configuration loads waits
// in its channel for Run, and SIGPIPE is ignored before the first log line.
func CatchSignals() *Signals {
	signal.Ignore(syscall.SIGPIPE)
	s := newSignals()
	signal.Notify(s.stop, stopSignals()...)
	signal.Notify(s.maintenance, syscall.SIGUSR2)
	if reloadOnHangUp() {
		signal.Notify(s.reload, syscall.SIGHUP)
	}
	return s
}

func newSignals() *Signals {
	// Room for the stop and the second stop, so neither is dropped.
	return &Signals{stop: make(chan os.Signal, 2), maintenance: make(chan os.Signal, 1), reload: make(chan os.Signal, 1)}
}

// stopSignals end the agent with a drain. SIGHUP is one of them, so it
// never kills the agent outright — unless it was already ignored when the
// agent started (nohup).
func stopSignals() []os.Signal {
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM, RestartSignal}
	if !signal.Ignored(syscall.SIGHUP) && !reloadOnHangUp() {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// release stops catching: the process's default handling is back.
func (s *Signals) release() {
	signal.Stop(s.stop)
	signal.Stop(s.maintenance)
	signal.Stop(s.reload)
}

// followSignals acts on s until done is closed: the first stop signal
// calls stop, the second closes a.skipDrain, and SIGUSR2 asks for a
// maintenance drain until the stop. It returns once it no longer reads s.
func (a *Agent) followSignals(s *Signals, stop context.CancelFunc, done <-chan struct{}) <-chan struct{} {
	followed := make(chan struct{})
	if s == nil {
		close(followed)
		return followed
	}
	go func() {
		defer close(followed)
		stops := 0
		for {
			select {
			case <-done:
				return
			case sig := <-s.stop:
				stops++
				switch stops {
				case 1:
					a.log.Info("stop signal received; stopping", zap.String("signal", sig.String()))
					a.stopAs.read(sig, a.opts.StopJob, a.log)
					a.up.StopAsked() // a reload under way gives way
					stop()
				case 2:
					a.log.Info("second stop signal received; skipping the drain", zap.String("signal", sig.String()))
					close(a.skipDrain)
				}
			case <-s.maintenance:
				if stops == 0 {
					a.drainOnSignal()
				}
			case <-s.reload:
				if stops == 0 {
					go a.up.ReloadOnSignal()
				}
			}
		}
	}()
	return followed
}

// drainOnSignal is SIGUSR2's maintenance drain.
func (a *Agent) drainOnSignal() {
	const sigusr2 = "user defined signal 2"
	if err := a.Drain(); err != nil {
		a.log.Warn("SIGUSR2: cannot drain: "+err.Error(), zap.String("signal", sigusr2))
		return
	}
	a.log.Info("SIGUSR2: draining for maintenance; `zoneproxy undrain` ends it", zap.String("signal", sigusr2))
}

// reloadOnHangUp: SIGHUP means a reload when systemd runs the agent (no
// terminal can hang up on it, and a daemon's SIGHUP is a reload by
// custom), unless it was ignored at start. Elsewhere it stays a stop.
func reloadOnHangUp() bool {
	if signal.Ignored(syscall.SIGHUP) {
		return false
	}
	return os.Getenv("NOTIFY_SOCKET") != "" || os.Getenv("INVOCATION_ID") != ""
}
