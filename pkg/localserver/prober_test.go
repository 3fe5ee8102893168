package localserver

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// A hung Envoy (kill -STOP) answers nothing: /ready turns
// ENVOY_UNREACHABLE within about a probe, without waiting on Envoy itself,
// and READY again once Envoy answers.
func TestHungEnvoyIsUnreachableWithoutWaiting(t *testing.T) {
	probeEvery, probeTimeout = 20*time.Millisecond, 500*time.Millisecond
	t.Cleanup(func() { probeEvery, probeTimeout = time.Second, time.Second })
	var hung atomic.Bool
	var asked atomic.Int32
	probe := func(ctx context.Context) (string, bool, error) {
		asked.Add(1)
		if hung.Load() {
			<-ctx.Done() // a stopped process: the connection is accepted, nothing answers
			return "", false, ctx.Err()
		}
		return "LIVE", true, nil
	}
	tr := state.NewTracker()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ln, tr)
	s.SetEnvoyProbe(probe)
	tr.Set(state.Ready, "Envoy ready")
	status := func() (int, string) {
		t.Helper()
		start := time.Now()
		code, body := s.Status(context.Background())
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("/ready took %s: it waits on Envoy", took)
		}
		return code, body
	}
	testutil.Eventually(t, 10*time.Second, "READY while Envoy answers LIVE", func() bool {
		code, body := status()
		return code == 200 && body == "READY" && tr.Current().Envoy.Live
	})

	hung.Store(true)
	testutil.Eventually(t, 10*time.Second, "ENVOY_UNREACHABLE once Envoy stops answering", func() bool {
		code, body := status()
		return code == 503 && strings.HasPrefix(body, "ENVOY_UNREACHABLE\nEnvoy's admin API does not answer /ready: no answer within 500ms")
	})

	hung.Store(false)
	testutil.Eventually(t, 10*time.Second, "READY again once Envoy answers", func() bool {
		code, body := status()
		return code == 200 && body == "READY"
	})

	// Shutdown ends the prober: Envoy is asked nothing more.
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := asked.Load()
	time.Sleep(5 * probeEvery) // nothing to await: the absence of questions
	if m := asked.Load(); m != n {
		t.Errorf("Envoy asked %d more times after Shutdown", m-n)
	}
}
