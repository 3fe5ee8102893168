package agent

import (
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// reloadOnHangUp: SIGHUP means a reload when systemd runs the agent (no
// terminal can hang up on it, and a daemon's SIGHUP is a reload by
// custom), unless it was ignored at start. Elsewhere it stays a stop.
func reloadOnHangUp() bool {
	if signal.Ignored(syscall.SIGHUP) {
		return false
	}
	return os.Getenv("NOTIFY_SOCKET") != "" || os.Getenv("INVOCATION_ID") != ""
}

// reloadOnSignal is SIGHUP's reload under systemd.
func (a *Agent) reloadOnSignal() {
	a.log.Info("SIGHUP: reloading the agent in place", zap.String("signal", "hangup"))
	exec, err := a.Reload()
	if err != nil {
		return // logged and counted by Reload
	}
	_ = exec()
}
