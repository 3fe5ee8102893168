// Package localserver is the agent's own HTTP server: /ready (READY only
// while Envoy itself reports LIVE), /metrics, and the handlers the agent
// adds (/logging, on loopback only). It observes the agent's state and
// never drives it.
package localserver

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

// Server is the loopback readiness endpoint, with an optional second
// listener that serves /metrics alone.
type Server struct {
	tracker *state.Tracker
	probe   atomic.Pointer[EnvoyProbe]
	ln      net.Listener
	mux     *http.ServeMux
	srv     *http.Server

	metricsLn  net.Listener
	metricsMux *http.ServeMux
	metricsSrv *http.Server
}

// New serves /ready on ln. Call Serve to start.
func New(ln net.Listener, tracker *state.Tracker) *Server {
	s := &Server{tracker: tracker, ln: ln, mux: http.NewServeMux(), metricsMux: http.NewServeMux()}
	s.mux.HandleFunc("/ready", s.ready)
	s.srv = newHTTPServer(refuseWebPages(s.mux))
	return s
}

// refuseWebPages turns away changes (POST /logging, /drain, /undrain) that
// a browser on this host makes for a web page: it sends an Origin header,
// curl and zoneproxy's own commands do not. Loopback alone would let any
// page the operator opens drain the proxy.
func refuseWebPages(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("Origin") != "" {
			http.Error(w, "refused: a request from a web page (Origin "+r.Header.Get("Origin")+") may not change the agent", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Timeouts of both listeners. The metrics listener faces other hosts: a
// client that keeps a connection idle, or asks for /metrics and never
// reads it, must not hold a descriptor and Envoy's stats page for ever.
// A write outlasts /metrics' own 5 s wait for Envoy's stats.
var (
	idleTimeout  = time.Minute
	writeTimeout = 30 * time.Second
)

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout}
}

// Handle adds another loopback-only endpoint (logging).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleMetrics serves h at /metrics on loopback and on the metrics
// listener, if there is one.
func (s *Server) HandleMetrics(h http.Handler) {
	s.mux.Handle("/metrics", h)
	s.metricsMux.Handle("/metrics", h)
}

// ServeMetricsOn adds a listener (--metrics-address) that answers
// /metrics and nothing else, so scrapers from other hosts never reach
// /ready or /logging. Call it before Serve.
func (s *Server) ServeMetricsOn(ln net.Listener) {
	s.metricsLn = ln
	s.metricsSrv = newHTTPServer(s.metricsMux)
}

// SetEnvoyProbe is called once Envoy runs.
func (s *Server) SetEnvoyProbe(p EnvoyProbe) { s.probe.Store(&p) }

// Serve runs every listener until Shutdown.
func (s *Server) Serve() error {
	metricsDone := make(chan error, 1)
	if s.metricsSrv != nil {
		go func() { metricsDone <- serve(s.metricsSrv, s.metricsLn) }()
	} else {
		metricsDone <- nil
	}
	err := serve(s.srv, s.ln)
	return errors.Join(err, <-metricsDone)
}

func serve(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops serving on every listener.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if s.metricsSrv != nil {
		err = errors.Join(err, s.metricsSrv.Shutdown(ctx))
	}
	return err
}

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
	if snap.Detail != "" && snap.Detail != readyDetail {
		// e.g. serving the cached configuration while the control plane is away.
		return http.StatusOK, "READY\n" + snap.Detail
	}
	return http.StatusOK, "READY"
}

// readyDetail is the plain READY detail, which adds nothing to the word.
const readyDetail = "Envoy ready"
