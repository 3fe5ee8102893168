// Package readiness serves the agent's loopback HTTP endpoint: /ready says
// READY only while Envoy itself reports LIVE. It observes the agent's state
// and never drives it.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// EnvoyProbe asks Envoy's admin /ready: its state word and whether it is LIVE.
type EnvoyProbe func(ctx context.Context) (state string, live bool, err error)

// Server is the loopback readiness endpoint.
type Server struct {
	tracker *state.Tracker
	probe   atomic.Pointer[EnvoyProbe]
	ln      net.Listener
	mux     *http.ServeMux
	srv     *http.Server
}

// New serves /ready on ln. Call Serve to start.
func New(ln net.Listener, tracker *state.Tracker) *Server {
	s := &Server{tracker: tracker, ln: ln, mux: http.NewServeMux()}
	s.mux.HandleFunc("/ready", s.ready)
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
	return s
}

// Handle adds another endpoint (metrics, logging).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// SetEnvoyProbe is called once Envoy runs.
func (s *Server) SetEnvoyProbe(p EnvoyProbe) { s.probe.Store(&p) }

// Serve runs until Shutdown.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops serving.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache, max-age=0")
	code, body := s.Status(r.Context())
	w.WriteHeader(code)
	fmt.Fprintln(w, body)
}

// Status is the answer /ready gives now: 200 READY, or 503 with a state
// word on the first line (e.g. WAITING_FOR_MESH) and, when not yet ready,
// the reason on the second.
func (s *Server) Status(ctx context.Context) (int, string) {
	snap := s.tracker.Current()
	if snap.Phase != state.Ready {
		// The word first, for probes that match it; the reason for people.
		return http.StatusServiceUnavailable, string(snap.Phase) + "\n" + snap.Detail
	}
	p := s.probe.Load()
	if p == nil {
		return http.StatusServiceUnavailable, string(state.EnvoyStarting)
	}
	word, live, err := (*p)(ctx)
	switch {
	case err != nil:
		return http.StatusServiceUnavailable, "ENVOY_UNREACHABLE"
	case !live:
		return http.StatusServiceUnavailable, "ENVOY_" + word
	}
	return http.StatusOK, "READY"
}
