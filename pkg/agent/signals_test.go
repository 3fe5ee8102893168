package agent

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Once CatchSignals returns, a stop signal and SIGUSR2 wait for the agent
// in their channels instead of killing the process, and SIGPIPE is ignored.
func TestSignalsAreCaughtOnceCatching(t *testing.T) {
	sigs := CatchSignals()
	defer sigs.release()
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
	// Ignored, SIGPIPE would otherwise end the test binary here.
	if err := syscall.Kill(os.Getpid(), syscall.SIGPIPE); err != nil {
		t.Fatal(err)
	}
}
