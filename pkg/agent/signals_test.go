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
