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

// With --health-address, a load balancer on another host reads /ready's
// status code and reason there, and reaches nothing else: no change of
// state (drain, undrain, logging), no metrics, no status.
func TestHealthListenerServesOnlyReady(t *testing.T) {
	loopback, health, metrics := loopbackListener(t), loopbackListener(t), loopbackListener(t)
	tracker := state.NewTracker()
	s := New(loopback, tracker)
	s.ServeMetricsOn(metrics)
	s.ServeHealthOn(health)
	s.HandleMetrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "zoneproxy_ready 0\n") }))
	s.Handle("/status", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "{}\n") }))
	s.HandleMaintenance(Maintenance{Drain: func() error { t.Error("drained through the health listener"); return nil }, Undrain: func() {}})
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	client := http.Client{Timeout: 10 * time.Second}
	do := func(method, path, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+health.Addr().String()+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("GET", "/ready", ""); code != 503 || body != "STARTING\nstarting\n" {
		t.Errorf("while starting: %d %q", code, body)
	}
	tracker.Set(state.Ready, "Envoy ready")
	for _, tc := range []struct {
		method, path, host string
		code               int
		body               string
	}{
		{"GET", "/ready", "", 200, "READY\n"},
		{"HEAD", "/ready", "", 200, ""},
		{"GET", "/ready", "10.0.0.5:9904", 200, "READY\n"}, // the load balancer's target
		{"GET", "/ready", "evil.example:9904", 421, ""},
		{"POST", "/drain", "", 404, ""},
		{"POST", "/undrain", "", 404, ""},
		{"GET", "/logging", "", 404, ""},
		{"GET", "/metrics", "", 404, ""},
		{"GET", "/status", "", 404, ""},
		{"POST", "/ready", "", 405, ""},
	} {
		code, body := do(tc.method, tc.path, tc.host)
		if code != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("%s %s (Host %q): got %d %q, want %d %q", tc.method, tc.path, tc.host, code, strings.TrimSpace(body), tc.code, tc.body)
		}
	}
}
