package localserver

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

func TestStatus(t *testing.T) {
	live := state.EnvoyHealth{Probed: true, Word: "LIVE", Live: true}
	draining := state.EnvoyHealth{Probed: true, Word: "DRAINING"}
	down := state.EnvoyHealth{Probed: true, Err: "no answer within 1s (is Envoy stopped or hung?)"}
	cases := []struct {
		name   string
		phase  state.Phase
		detail string
		envoy  *state.EnvoyHealth // Envoy's answer, after the phase was set
		code   int
		body   string
	}{
		{"waiting says why", state.WaitingForMesh, `waiting for mesh "payments" (attempt 2, next in 2s)`, nil, 503, "WAITING_FOR_MESH\nwaiting for mesh \"payments\" (attempt 2, next in 2s)"},
		{"control plane down", state.WaitingForControlPlane, "cannot reach", nil, 503, "WAITING_FOR_CONTROL_PLANE\ncannot reach"},
		{"ready and Envoy live", state.Ready, "Envoy ready", &live, 200, "READY"},
		{"ready on the cache says so", state.Ready, "serving the cached configuration of …", &live, 200, "READY\nserving the cached configuration of …"},
		{"ready, no answer from Envoy yet: the agent's READY stands", state.Ready, "Envoy ready", nil, 200, "READY"},
		{"Envoy reports another state", state.Ready, "", &draining, 503, "ENVOY_DRAINING\nEnvoy reports DRAINING, not LIVE"},
		{"Envoy's admin does not answer", state.Ready, "", &down, 503, "ENVOY_UNREACHABLE\nEnvoy's admin API does not answer /ready: no answer within 1s (is Envoy stopped or hung?)"},
		{"drained for maintenance says so, whatever Envoy answers", state.Drained, "drained for maintenance since 2025-01-02T03:04:05Z: …; run `zoneproxy undrain` to serve again", &down, 503,
			"DRAINED\ndrained for maintenance since 2025-01-02T03:04:05Z: …; run `zoneproxy undrain` to serve again"},
		{"terminating", state.Terminating, "draining (3s left)", &live, 503, "TERMINATING\ndraining (3s left)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := state.NewTracker()
			tr.Set(tc.phase, tc.detail)
			if tc.envoy != nil {
				h := *tc.envoy
				h.At = time.Now()
				tr.SetEnvoy(h)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := New(ln, tr)
			defer ln.Close()
			code, body := s.Status(context.Background())
			if code != tc.code || body != tc.body {
				t.Fatalf("got %d %q, want %d %q", code, body, tc.code, tc.body)
			}
		})
	}
}

func TestOnlyGetAndHead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ln, state.NewTracker())
	go s.Serve()
	defer s.Shutdown(context.Background())
	resp, err := http.Post("http://"+ln.Addr().String()+"/ready", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /ready: %d", resp.StatusCode)
	}
}

// A web page open on this host may not drain the proxy or change its log
// levels; curl and zoneproxy's commands (no Origin) may.
func TestChangesFromWebPagesAreRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ln, state.NewTracker())
	var drains atomic.Int32
	s.HandleMaintenance(Maintenance{Drain: func() error { drains.Add(1); return nil }, Undrain: func() {}})
	go s.Serve()
	defer s.Shutdown(context.Background())
	cases := []struct {
		method, path, origin string
		want                 int
	}{
		{"POST", "/drain", "http://evil.example", http.StatusForbidden},
		{"POST", "/drain", "null", http.StatusForbidden},
		{"POST", "/drain", "", http.StatusAccepted},
		{"GET", "/ready", "http://evil.example", http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, "http://"+ln.Addr().String()+tc.path, nil)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s with Origin %q: %d, want %d", tc.method, tc.path, tc.origin, resp.StatusCode, tc.want)
		}
	}
	if n := drains.Load(); n != 1 {
		t.Errorf("%d drains, want 1 (only the request without an Origin)", n)
	}
}
