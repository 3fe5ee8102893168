package localserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// serveAll serves loopback, health and metrics listeners until the test ends.
func serveAll(t *testing.T) (loopback, health, metrics string) {
	t.Helper()
	lo, he, me := loopbackListener(t), loopbackListener(t), loopbackListener(t)
	tr := state.NewTracker()
	tr.Set(state.Ready, "Envoy ready")
	s := New(lo, tr)
	s.ServeHealthOn(he)
	s.ServeMetricsOn(me)
	s.HandleMetrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "zoneproxy_ready 1\n") }))
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	})
	return lo.Addr().String(), he.Addr().String(), me.Addr().String()
}

// A request with a header far beyond what a probe or a scraper sends is
// refused, on every listener, before the agent holds it all.
func TestEveryListenerRefusesAnOverLongHeader(t *testing.T) {
	loopback, health, metrics := serveAll(t)
	client := http.Client{Timeout: 20 * time.Second}
	for _, tc := range []struct{ name, addr, path string }{
		{"loopback", loopback, "/ready"},
		{"health", health, "/ready"},
		{"metrics", metrics, "/metrics"},
	} {
		for _, pad := range []int{100, 64 << 10} {
			req, _ := http.NewRequest("GET", "http://"+tc.addr+tc.path, nil)
			req.Header.Set("X-Pad", strings.Repeat("a", pad))
			want := http.StatusOK
			if pad > maxHeaderBytes {
				want = http.StatusRequestHeaderFieldsTooLarge
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s with a %d-byte header: %v", tc.name, pad, err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s with a %d-byte header: %d, want %d", tc.name, pad, resp.StatusCode, want)
			}
		}
	}
}
