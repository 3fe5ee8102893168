package localserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// With --metrics-address, the second listener answers /metrics and
// nothing else; loopback keeps every endpoint.
func TestMetricsListenerServesOnlyMetrics(t *testing.T) {
	loopback, extra := loopbackListener(t), loopbackListener(t)
	s := New(loopback, state.NewTracker())
	s.ServeMetricsOn(extra)
	s.HandleMetrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "zoneproxy_ready 0\n") }))
	s.Handle("/logging", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "levels\n") }))
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()

	cases := []struct {
		ln   net.Listener
		path string
		code int
		body string
	}{
		{extra, "/metrics", 200, "zoneproxy_ready 0\n"},
		{extra, "/ready", 404, ""},
		{extra, "/logging", 404, ""},
		{extra, "/", 404, ""},
		{loopback, "/metrics", 200, "zoneproxy_ready 0\n"},
		{loopback, "/ready", 503, "STARTING\nstarting\n"},
		{loopback, "/logging", 200, "levels\n"},
	}
	client := http.Client{Timeout: 10 * time.Second}
	for _, tc := range cases {
		t.Run(tc.ln.Addr().String()+tc.path, func(t *testing.T) {
			resp, err := client.Get("http://" + tc.ln.Addr().String() + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || (tc.body != "" && string(b) != tc.body) {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, b, tc.code, tc.body)
			}
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for _, ln := range []net.Listener{loopback, extra} {
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Shutdown", ln.Addr())
		}
	}
}
