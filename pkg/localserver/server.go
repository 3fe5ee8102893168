// Package localserver is the agent's own HTTP server: /ready (READY only
// while Envoy itself reports LIVE), /metrics, and the handlers the agent
// adds (/logging, on loopback only). It observes the agent's state and
// never drives it; its Envoy prober publishes what Envoy's admin answers
// for every observer of the state.
package localserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// EnvoyProbe asks Envoy's admin /ready: its state word and whether it is LIVE.
type EnvoyProbe func(ctx context.Context) (state string, live bool, err error)

// Server is the loopback readiness endpoint, with an optional second
// listener that serves /metrics alone.
type Server struct {
	tracker *state.Tracker
	ln      net.Listener
	mux     *http.ServeMux
	srv     *http.Server

	metricsMux *http.ServeMux
	// others are the listeners beside loopback's: metrics, health.
	others []listener

	proberMu sync.Mutex
	prober   *prober

	generations func() string // SetGenerations; nil for none
}

// New serves /ready on ln. Call Serve to start.
func New(ln net.Listener, tracker *state.Tracker) *Server {
	s := &Server{tracker: tracker, ln: netutil.LimitListener(ln, loopbackConns), mux: http.NewServeMux(), metricsMux: http.NewServeMux()}
	s.mux.HandleFunc("/ready", readyOn(func(r *http.Request) (int, string) { return s.Status(r.Context()) }))
	s.srv = newHTTPServer(checkHost(loopbackHosts, refuseWebPages(onlyOwner(s.mux))))
	return s
}

// Timeouts of both listeners. The metrics listener faces other hosts: a
// client that keeps a connection idle, or asks for /metrics and never
// reads it, must not hold a descriptor and Envoy's stats page for ever.
// A write outlasts /metrics' own wait for Envoy's stats (metrics.EnvoyStatsTimeout).
var (
	idleTimeout  = time.Minute
	writeTimeout = 30 * time.Second
)

// Limits of every listener. Whoever reaches one must not grow the agent:
// a request's header is at most maxHeaderBytes (a probe's or a scraper's
// is a few hundred bytes; Go's default, 1 MB, let 1,000 unfinished ones
// take 1.8 GB) and must be whole within readHeaderTimeout; each listener
// serves at most its cap of connections at once, further ones wait in the
// kernel's backlog. Loopback's cap is its own, so that a flood on
// --health-address or --metrics-address leaves `zoneproxy status`,
// drain and reload answered.
const (
	maxHeaderBytes    = 8 << 10
	readHeaderTimeout = 3 * time.Second
	loopbackConns     = 32
	publicConns       = 64
)

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: 10 * time.Second,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
}

// public is a listener other hosts reach, with its cap of connections.
func public(ln net.Listener, h http.Handler) listener {
	return listener{netutil.LimitListener(ln, publicConns), newHTTPServer(h)}
}

// Handle adds another loopback-only endpoint (logging).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleMetrics serves h at /metrics on loopback and on the metrics
// listener, if there is one.
func (s *Server) HandleMetrics(h http.Handler) {
	s.mux.Handle("/metrics", h)
	s.metricsMux.Handle("/metrics", h)
}

// listener is one listener and its server.
type listener struct {
	ln  net.Listener
	srv *http.Server
}

// ServeMetricsOn adds a listener (--metrics-address) that answers
// /metrics and nothing else, so scrapers from other hosts never reach
// /ready or /logging. Call it before Serve.
func (s *Server) ServeMetricsOn(ln net.Listener) {
	s.others = append(s.others, public(ln, checkHost(metricsHosts, s.metricsMux)))
}

// ServeHealthOn adds a listener (--health-address) that answers GET and
// HEAD /ready, with loopback's code and word and a fixed reason
// (PublicStatus), and nothing else: a load balancer
// on another host probes it; nothing there changes state. Call it before
// Serve.
func (s *Server) ServeHealthOn(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", readyOn(func(*http.Request) (int, string) { return s.PublicStatus() }))
	s.others = append(s.others, public(ln, checkHost(healthHosts, mux)))
}

// SetEnvoyProbe is called once Envoy runs: from then until Shutdown, a
// prober asks Envoy's admin /ready every second and publishes the answer
// in the tracker (see prober). A later call replaces the probe.
func (s *Server) SetEnvoyProbe(p EnvoyProbe) {
	s.proberMu.Lock()
	defer s.proberMu.Unlock()
	s.prober.stop()
	s.prober = startProber(s.tracker, p)
}

// Serve runs every listener until Shutdown.
func (s *Server) Serve() error {
	done := make(chan error, len(s.others))
	for _, l := range s.others {
		go func() { done <- serve(l.srv, l.ln) }()
	}
	err := serve(s.srv, s.ln)
	for range s.others {
		err = errors.Join(err, <-done)
	}
	return err
}

func serve(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the Envoy prober and serving on every listener.
func (s *Server) Shutdown(ctx context.Context) error {
	s.proberMu.Lock()
	s.prober.stop()
	s.prober = nil
	s.proberMu.Unlock()
	err := s.srv.Shutdown(ctx)
	for _, l := range s.others {
		err = errors.Join(err, l.srv.Shutdown(ctx))
	}
	return err
}

// Close closes every listener of a server that was never served: a
// start that fails before Serve.
func (s *Server) Close() error {
	err := s.ln.Close()
	for _, l := range s.others {
		err = errors.Join(err, l.ln.Close())
	}
	return err
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Status is the answer /ready gives now: 200 READY, or 503 with a word on
// the first line (e.g. WAITING_FOR_MESH, ENVOY_UNREACHABLE) and, when
// there is one, the reason on the second. It is the tracker's verdict,
// the one the metrics and STATUS= give too, and never waits for Envoy.
func (s *Server) Status(context.Context) (int, string) {
	v := s.tracker.Current().Verdict()
	code := http.StatusServiceUnavailable
	if v.Ready {
		code = http.StatusOK
	}
	body := errtext.Outbound(v.Word)
	if v.Detail != "" && v.Detail != readyDetail {
		// The word first, for probes that match it; the reason for people
		// (for READY: e.g. serving the cached configuration while the
		// control plane is away), which may quote a control plane.
		body += "\n" + errtext.Outbound(v.Detail)
	}
	return code, body + s.generationLine()
}

// readyDetail is the plain READY detail, which adds nothing to the word.
const readyDetail = "Envoy ready"
