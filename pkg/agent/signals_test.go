package agent

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// Once CatchSignals returns, a stop signal and SIGUSR2 wait for the agent
// in their channels instead of killing the process, and SIGPIPE is ignored.
func TestSignalsAreCaughtOnceCatching(t *testing.T) {
	sigs := CatchSignals()
	defer sigs.release()
	defer signal.Reset(syscall.SIGPIPE)
	for sig, ch := range map[syscall.Signal]chan os.Signal{syscall.SIGTERM: sigs.stop, syscall.SIGUSR2: sigs.maintenance} {
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-ch:
			if got != sig {
				t.Errorf("sent %v, the channel got %v", sig, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v never reached its channel", sig)
		}
	}
	// A write to a broken stderr would otherwise end the agent.
	if !signal.Ignored(syscall.SIGPIPE) {
		t.Error("SIGPIPE is not ignored")
	}
}

// SIGHUP is a reload only under systemd, and never when ignored at start
// (under nohup, as this test may run too: then it is neither).
func TestSIGHUPReloadsOnlyUnderSystemd(t *testing.T) {
	ignored := signal.Ignored(syscall.SIGHUP)
	for _, tc := range []struct {
		env    map[string]string
		reload bool
	}{
		{map[string]string{}, false},
		{map[string]string{"INVOCATION_ID": "0123"}, true},
		{map[string]string{"NOTIFY_SOCKET": "/run/systemd/notify"}, true},
	} {
		for _, k := range []string{"INVOCATION_ID", "NOTIFY_SOCKET"} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		if got := reloadOnHangUp(); got != (tc.reload && !ignored) {
			t.Errorf("%v (ignored at start: %v): reload %v, want %v", tc.env, ignored, got, tc.reload && !ignored)
		}
		stops := false
		for _, s := range stopSignals() {
			stops = stops || s.String() == "hangup"
		}
		if stops != (!tc.reload && !ignored) {
			t.Errorf("%v (ignored at start: %v): SIGHUP a stop signal %v", tc.env, ignored, stops)
		}
	}
}
