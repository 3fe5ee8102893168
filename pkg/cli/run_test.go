package cli

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// Once listenForSignals returns, a stop signal waits for the agent in its
// channel instead of killing the process.
func TestSignalsAreCaughtOnceListening(t *testing.T) {
	sigs := listenForSignals()
	defer signal.Stop(sigs.stop)
	defer signal.Stop(sigs.usr2)
	for sig, ch := range map[syscall.Signal]chan os.Signal{syscall.SIGTERM: sigs.stop, syscall.SIGUSR2: sigs.usr2} {
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
}
