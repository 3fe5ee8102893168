package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// Waiting for DRAINED polls /ready over one kept-alive connection, not a
// new one every 100 ms.
func TestAwaitPhasePollsOverOneConnection(t *testing.T) {
	var polls, conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if polls.Add(1) < 4 {
			_, _ = w.Write([]byte("DRAINING\nsince now\n"))
			return
		}
		_, _ = w.Write([]byte("DRAINED\nlisteners closed\n"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer loopback.CloseIdleConnections()
	word, detail, err := awaitPhase(context.Background(), srv.URL, 30*time.Second, state.Drained)
	if err != nil || word != "DRAINED" || detail != "listeners closed" {
		t.Fatalf("awaitPhase: %q %q %v", word, detail, err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d polls over %d connections, want 1", polls.Load(), n)
	}
}

// An undrain is over once the proxy is back in rotation: READY, or
// NO_ZONE_LISTENER for a proxy still waiting for its zone listener, as it
// was before the drain.
func TestUndrainAcceptsEveryServingPhase(t *testing.T) {
	for _, answer := range []string{"READY\nserving\n", "NO_ZONE_LISTENER\nEnvoy has no listener ze-port\n"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(answer)) }))
		// The answer is there at the first poll: seconds are plenty.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		word, _, err := awaitPhase(ctx, srv.URL, undrainWait, undrained...)
		cancel()
		srv.Close()
		if err != nil {
			t.Errorf("/ready %q: undrain still waiting (%s, %v)", answer, word, err)
		}
	}
	loopback.CloseIdleConnections()
}
