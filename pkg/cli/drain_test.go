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
	word, detail, err := awaitPhase(context.Background(), srv.URL, state.Drained, 30*time.Second)
	if err != nil || word != "DRAINED" || detail != "listeners closed" {
		t.Fatalf("awaitPhase: %q %q %v", word, detail, err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d polls over %d connections, want 1", polls.Load(), n)
	}
}
