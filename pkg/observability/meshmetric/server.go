package meshmetric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds one read of Envoy's admin stats.
const DefaultTimeout = 5 * time.Second

// Options configure the hijacker.
type Options struct {
	// Path is the Unix socket Envoy's MeshMetric cluster points at:
	// kumasock.MetricsHijacker(workDir, name, mesh).
	Path string
	// Stats performs GET /stats?<query> on Envoy's admin API and returns
	// the body; an error or a non-200 answer must be an error.
	Stats func(ctx context.Context, query string) (string, error)
	// Extra, if set, writes the agent's own metrics in Prometheus text;
	// they follow Envoy's, without the profile or extra labels.
	Extra func(w io.Writer)
	// Timeout bounds each admin read; DefaultTimeout when zero.
	Timeout time.Duration
}

// Server answers Envoy's forwarded MeshMetric scrapes on a Unix socket.
type Server struct {
	opts Options
	ln   net.Listener
	http *http.Server
	cfg  atomic.Pointer[Config]
	done chan struct{}
	err  error // why serving stopped, once done is closed
}

// Serve replaces whatever stale file is at opts.Path, listens there with
// mode 0600 and serves until Close. Until SetConfig gives it a config,
// scrapes pass Envoy's stats through unfiltered and unlabelled, unused
// stats included, as kuma-dp does before its first dynconf fetch.
func Serve(opts Options) (*Server, error) {
	if opts.Path == "" || opts.Stats == nil {
		return nil, errors.New("meshmetric: Options.Path and Options.Stats are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if err := removeStale(opts.Path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", opts.Path)
	if err != nil {
		return nil, fmt.Errorf("meshmetric: listen on %s: %w", opts.Path, err)
	}
	// The work dir is 0700, so the moment before this chmod exposes nothing.
	if err := os.Chmod(opts.Path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("meshmetric: chmod %s: %w", opts.Path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // Close removes it, below
	return serveOn(opts, ln), nil
}

// serveOn serves on ln, which listens at opts.Path.
func serveOn(opts Options, ln net.Listener) *Server {
	s := &Server{opts: opts, ln: ln, done: make(chan struct{})}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      opts.Timeout + 10*time.Second,
		IdleTimeout:       time.Minute,
	}
	go func() {
		err := s.http.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
		close(s.done)
	}()
	return s
}

// removeStale deletes a socket or file left at path by an earlier run.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("meshmetric: %w", err)
	case fi.IsDir():
		return fmt.Errorf("meshmetric: %s is a directory where the metrics socket belongs; remove it", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("meshmetric: remove stale %s: %w", path, err)
	}
	return nil
}

// Path is the socket the server listens on.
func (s *Server) Path() string { return s.opts.Path }

// SetConfig applies a dynconf config to the following scrapes; nil goes
// back to no policy.
func (s *Server) SetConfig(c *Config) { s.cfg.Store(c) }

// Config is the config in force, nil before any.
func (s *Server) Config() *Config { return s.cfg.Load() }

// Done is closed when the server stops serving; Err then says why.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the error that stopped serving, nil after Close.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close stops serving, drops open connections and removes the socket.
func (s *Server) Close() error {
	err := s.http.Close()
	<-s.done
	if rmErr := os.Remove(s.opts.Path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
		err = fmt.Errorf("meshmetric: %w", rmErr)
	}
	return err
}

// StatsQuery is the admin /stats query for a config: kuma-dp's, with
// usedonly left out when the policy asks for unused stats (kuma-dp always
// sends it) or before any policy.
func StatsQuery(c *Config) string {
	if c.IncludeUnused() {
		return "format=prometheus&text_readouts="
	}
	return "format=prometheus&text_readouts=&usedonly="
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/meshmetric") {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	cfg := s.cfg.Load()
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	stats, err := s.opts.Stats(ctx, StatsQuery(cfg))
	if err != nil {
		http.Error(w, "Envoy admin stats unavailable: "+oneLine(err), http.StatusServiceUnavailable)
		return
	}
	fams, err := cfg.Filter(stats)
	if err != nil {
		http.Error(w, "Envoy admin stats unreadable: "+oneLine(err), http.StatusServiceUnavailable)
		return
	}

	var out bytes.Buffer
	out.Grow(len(stats) + len(stats)/4) // about the size of Envoy's page
	if err := WriteText(&out, fams); err != nil {
		http.Error(w, "Envoy admin stats not writable as Prometheus text: "+oneLine(err), http.StatusInternalServerError)
		return
	}
	if s.opts.Extra != nil {
		s.opts.Extra(&out)
	}
	w.Header().Set("Content-Type", string(textFormat))
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	if r.Method == http.MethodGet {
		w.Write(out.Bytes())
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
