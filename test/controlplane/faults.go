package controlplane

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Faults are failures the test CP injects on demand.
type Faults struct {
	// RefuseConnections closes the DP listener (connection refused) until
	// cleared. Connections already open are kept.
	RefuseConnections bool
	// BootstrapStatus, when non-zero, answers every /bootstrap with this
	// status and a short text body.
	BootstrapStatus int
	// BootstrapRetryAfter is sent as Retry-After with BootstrapStatus.
	BootstrapRetryAfter string
	// BootstrapDelay delays every /bootstrap answer.
	BootstrapDelay time.Duration
	// RejectADSAuth rejects every ADS/HDS stream with an authentication error.
	RejectADSAuth bool
	// Hang freezes the DP server like a kuma-cp stopped with SIGSTOP until
	// cleared: the listener stays open and the kernel completes TCP
	// handshakes, but nothing is accepted, no TLS handshake completes and
	// open connections get no bytes (reads and writes block); the
	// lifecycle's timers (deregistration, cache expiration) do not fire.
	// A /bootstrap POST or a new gRPC stream hangs rather than fails.
	// Clearing it carries everything on. The admin API stays up.
	Hang bool
}

// dpServerState is the state of the one TLS listener of the DP server.
type dpServerState struct {
	mu         sync.Mutex
	ln         net.Listener
	srv        *http.Server
	detached   []*http.Server // listener closed, connections still served
	refusing   bool
	restarting bool
	closed     bool
	restartMu  sync.Mutex // serialises Restart calls
	// kill is closed when every connection is dropped (closeAllLocked):
	// connections held by the Hang fault give up then.
	kill chan struct{}
}

// SetFaults replaces the active faults.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	s.hang.set(f.Hang)
	s.log.printf("faults set refuseConnections=%t bootstrapStatus=%d bootstrapDelay=%s rejectADSAuth=%t hang=%t",
		f.RefuseConnections, f.BootstrapStatus, f.BootstrapDelay, f.RejectADSAuth, f.Hang)
	s.dp.mu.Lock()
	defer s.dp.mu.Unlock()
	s.dp.refusing = f.RefuseConnections
	if err := s.reconcileLocked(); err != nil {
		s.log.printf("dp-server listen again failed: %v", err)
	}
}

func (s *Server) currentFaults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// Restart closes the DP listener and every connection (so every ADS stream
// ends with an error), stays down for `down`, then listens again on the
// same port. State (meshes, tokens' key, proxies seen, the Dataplane
// store) is kept, like a CP with a persistent store; what kuma-cp holds in
// memory is not: no node is active any more and pending deregistrations
// are dropped without deleting (kuma-cp's graceful-shutdown branch), as
// are registrations sleeping CacheExpiration. Faults stay set. It returns
// once the listener is back (or stays down because RefuseConnections is
// set).
func (s *Server) Restart(down time.Duration) error { return s.restart(down, nil) }

// restart is Restart; whileDown, if set, runs once every connection is
// dropped and before the listener is back.
func (s *Server) restart(down time.Duration, whileDown func()) error {
	s.dp.restartMu.Lock()
	defer s.dp.restartMu.Unlock()

	s.dp.mu.Lock()
	if s.dp.closed {
		s.dp.mu.Unlock()
		return errors.New("controlplane: server closed")
	}
	s.dp.restarting = true
	dropped := s.newEpoch()
	s.closeAllLocked()
	s.dp.mu.Unlock()
	s.log.printf("dp-server restarting: down for %s; %d pending deregistrations dropped", down, dropped)
	if whileDown != nil {
		whileDown()
	}

	t := time.NewTimer(down)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
	}

	s.mu.Lock()
	s.down = false
	s.mu.Unlock()
	s.dp.mu.Lock()
	defer s.dp.mu.Unlock()
	s.dp.restarting = false
	if err := s.reconcileLocked(); err != nil {
		return err
	}
	s.log.printf("dp-server restarted on %s", s.addr)
	return nil
}

// reconcileLocked opens or closes the listener to match the state flags.
func (s *Server) reconcileLocked() error {
	want := !s.dp.closed && !s.dp.refusing && !s.dp.restarting
	switch {
	case want && s.dp.ln == nil:
		return s.listenLocked()
	case !want && s.dp.ln != nil:
		_ = s.dp.ln.Close()
		s.dp.detached = append(s.dp.detached, s.dp.srv)
		s.dp.ln, s.dp.srv = nil, nil
		s.log.printf("dp-server listener closed")
	}
	return nil
}

// newEpoch forgets what kuma-cp holds in memory, as a restart does, and
// returns how many deregistrations were pending.
func (s *Server) newEpoch() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	close(s.epochDone)
	s.epochDone = make(chan struct{})
	s.active = map[string]int64{}
	dropped := 0
	for _, n := range s.nodes {
		if !n.deregSince.IsZero() {
			dropped++
		}
		n.stream, n.connected, n.deregSince = 0, false, time.Time{}
	}
	for _, p := range s.proxies {
		p.info.Connected = false
	}
	return dropped
}

// closeAllLocked closes the listener and every connection.
func (s *Server) closeAllLocked() {
	if s.dp.kill != nil {
		close(s.dp.kill)
		s.dp.kill = nil
	}
	if s.dp.srv != nil {
		_ = s.dp.srv.Close()
	}
	for _, srv := range s.dp.detached {
		_ = srv.Close()
	}
	s.dp.ln, s.dp.srv, s.dp.detached = nil, nil, nil
}

func (s *Server) listenLocked() error {
	raw, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.addr = raw.Addr().String()
	if s.dp.kill == nil {
		s.dp.kill = make(chan struct{})
	}
	ln := newHangListener(raw, &s.hang, s.dp.kill)
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.serveDP),
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{s.certs.tlsCert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ErrorLog: log.New(s.log, "dp-server: ", 0),
	}
	s.dp.ln, s.dp.srv = ln, srv
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	s.log.printf("dp-server listening on %s", s.addr)
	return nil
}

// serveDP splits gRPC from plain HTTP like kuma's DP server.
func (s *Server) serveDP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 && strings.Contains(r.Header.Get("Content-Type"), "application/grpc") {
		s.grpcServer.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

type faultsJSON struct {
	RefuseConnections bool   `json:"refuseConnections"`
	BootstrapStatus   int    `json:"bootstrapStatus"`
	RetryAfter        string `json:"bootstrapRetryAfter,omitempty"`
	BootstrapDelay    string `json:"bootstrapDelay"`
	RejectADSAuth     bool   `json:"rejectADSAuth"`
	Hang              bool   `json:"hang"`
}

// MarshalJSON writes BootstrapDelay as a Go duration string ("2s").
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		RefuseConnections: f.RefuseConnections,
		BootstrapStatus:   f.BootstrapStatus,
		RetryAfter:        f.BootstrapRetryAfter,
		BootstrapDelay:    f.BootstrapDelay.String(),
		RejectADSAuth:     f.RejectADSAuth,
		Hang:              f.Hang,
	})
}

// UnmarshalJSON reads BootstrapDelay as a Go duration string; "" is 0.
func (f *Faults) UnmarshalJSON(data []byte) error {
	var w faultsJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	var d time.Duration
	if w.BootstrapDelay != "" {
		var err error
		if d, err = time.ParseDuration(w.BootstrapDelay); err != nil {
			return fmt.Errorf("bootstrapDelay: %w", err)
		}
	}
	if d < 0 {
		return errors.New("bootstrapDelay: must not be negative")
	}
	if w.BootstrapStatus != 0 && (w.BootstrapStatus < 100 || w.BootstrapStatus > 999) {
		return fmt.Errorf("bootstrapStatus: %d is not an HTTP status", w.BootstrapStatus)
	}
	*f = Faults{
		RefuseConnections:   w.RefuseConnections,
		BootstrapStatus:     w.BootstrapStatus,
		BootstrapRetryAfter: w.RetryAfter,
		BootstrapDelay:      d,
		RejectADSAuth:       w.RejectADSAuth,
		Hang:                w.Hang,
	}
	return nil
}
