// Package dynconf polls Envoy's system_dynamicconfig listener, which the
// control plane serves on kuma-mesh-metric-config.sock in the work dir, and
// hands each path's body (/meshmetric, /otel) to a handler.
//
// Like kuma-dp it sends If-None-Match with the last accepted ETag, applies a
// 200, ignores a 304, and treats a 404 as "no config". Unlike kuma-dp, a
// missing socket or a refused connection also means "no config": the
// control plane removes the listener when the last policy needing it goes,
// so the agent reverts to no policy instead of keeping the last config
// until it restarts.
package dynconf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/throttle"
)

// DefaultInterval is kuma-dp's default refresh interval.
const DefaultInterval = time.Second

// maxBody bounds what one path may return; real bodies are a few KiB.
const maxBody = 1 << 20

// Handler applies one path's config. A nil body means there is no config
// (404, or the listener is gone); it comes once, and only after a body was
// accepted, as handlers start with no config. An error keeps the previous
// config in force and the body is offered again on the next poll.
type Handler func(body []byte) error

// Options configure a Poller.
type Options struct {
	// Socket is kumasock.DynamicConfig(workDir).
	Socket string
	// Interval between polls; DefaultInterval when zero. It also bounds each request.
	Interval time.Duration
	// Handlers by path, each starting with "/", e.g. "/meshmetric".
	Handlers map[string]Handler
	Log      *zap.Logger
}

// warnEvery keeps a broken listener from writing a warning every second.
const warnEvery = time.Minute

// Poller fetches every path once per interval, in path order.
type Poller struct {
	interval time.Duration
	client   *http.Client
	log      *zap.Logger
	paths    []*pathState

	mu sync.Mutex // guards the counters in paths
}

type pathState struct {
	path    string
	handler Handler
	etag    string
	applied bool // the handler holds a config (so "no config" must be told once)
	// Apart, so that a flapping listener cannot hide a rejected config.
	fetchWarn, configWarn throttle.Throttle

	calls, handlerErrors, fetchErrors uint64
}

// New checks the options; it starts nothing.
func New(o Options) (*Poller, error) {
	if o.Socket == "" {
		return nil, errors.New("dynconf: Socket is empty; pass kumasock.DynamicConfig(workDir)")
	}
	if o.Interval < 0 {
		return nil, fmt.Errorf("dynconf: Interval %s is negative; use a positive duration or zero for %s", o.Interval, DefaultInterval)
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if len(o.Handlers) == 0 {
		return nil, errors.New("dynconf: no Handlers; register at least /meshmetric")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	p := &Poller{interval: o.Interval, log: o.Log, client: unixClient(o.Socket)}
	for path, h := range o.Handlers {
		if !strings.HasPrefix(path, "/") || h == nil {
			return nil, fmt.Errorf("dynconf: handler path %q must start with \"/\" and have a non-nil handler", path)
		}
		p.paths = append(p.paths, &pathState{path: path, handler: h,
			fetchWarn: throttle.Throttle{Every: warnEvery}, configWarn: throttle.Throttle{Every: warnEvery}})
	}
	slices.SortFunc(p.paths, func(a, b *pathState) int { return strings.Compare(a.path, b.path) })
	return p, nil
}

// unixClient dials the socket afresh for every request: Envoy may remove
// and re-add the listener, and a kept-alive connection would outlive it.
func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// newTicker ticks every d; tests tick by hand.
var newTicker = func(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Run polls at once and then every interval until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	ticks, stop := newTicker(p.interval)
	defer stop()
	for {
		p.poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
	}
}

func (p *Poller) poll(ctx context.Context) {
	for _, ps := range p.paths {
		if ctx.Err() != nil {
			return
		}
		p.pollPath(ctx, ps)
	}
}

func (p *Poller) pollPath(ctx context.Context, ps *pathState) {
	status, etag, body, err := p.fetch(ctx, ps)
	switch {
	case err != nil && listenerGone(err):
		p.revert(ps, "listener gone")
	case err != nil:
		if ctx.Err() != nil {
			return
		}
		p.count(&ps.fetchErrors)
		ps.fetchWarn.Warn(p.log, "cannot fetch dynamic config; keeping the last one", zap.String("path", ps.path), zap.Error(err))
	case status == http.StatusOK:
		p.apply(ps, etag, body)
	case status == http.StatusNotModified:
	case status == http.StatusNotFound:
		p.revert(ps, "not found")
	default:
		p.count(&ps.fetchErrors)
		ps.fetchWarn.Warn(p.log, "unexpected status from the dynamic config listener; keeping the last config",
			zap.String("path", ps.path), zap.Int("status", status))
	}
}

func (p *Poller) fetch(ctx context.Context, ps *pathState) (status int, etag string, body []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.interval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+ps.path, nil)
	if err != nil {
		return 0, "", nil, err
	}
	if ps.etag != "" {
		req.Header.Set("If-None-Match", ps.etag)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", nil, nil
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, "", nil, fmt.Errorf("reading %s: %w", ps.path, err)
	}
	if len(body) > maxBody {
		return 0, "", nil, fmt.Errorf("%s body exceeds %d bytes", ps.path, maxBody)
	}
	return resp.StatusCode, resp.Header.Get("Etag"), body, nil
}

// listenerGone is a dial that found no socket or nobody listening on it.
func listenerGone(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

func (p *Poller) apply(ps *pathState, etag string, body []byte) {
	p.count(&ps.calls)
	if err := ps.handler(body); err != nil {
		p.count(&ps.handlerErrors)
		ps.configWarn.Warn(p.log, "dynamic config rejected; keeping the last one", zap.String("path", ps.path), zap.Error(err))
		return
	}
	p.log.Info("applied dynamic config", zap.String("path", ps.path), zap.String("etag", etag))
	ps.etag, ps.applied = etag, true
}

func (p *Poller) revert(ps *pathState, why string) {
	ps.etag = ""
	if !ps.applied {
		return
	}
	p.count(&ps.calls)
	if err := ps.handler(nil); err != nil {
		p.count(&ps.handlerErrors)
		ps.configWarn.Warn(p.log, "cannot remove dynamic config; will retry", zap.String("path", ps.path), zap.Error(err))
		return
	}
	p.log.Info("dynamic config removed", zap.String("path", ps.path), zap.String("reason", why))
	ps.applied = false
}

func (p *Poller) count(c *uint64) {
	p.mu.Lock()
	*c++
	p.mu.Unlock()
}

// The poller's counters by path, read at each scrape.
var (
	handlerCallsDesc = prometheus.NewDesc("zoneproxy_dynconf_handler_calls_total",
		"Dynamic config changes handed to a handler, by path.", []string{"path"}, nil)
	handlerErrorsDesc = prometheus.NewDesc("zoneproxy_dynconf_handler_errors_total",
		"Dynamic config changes a handler rejected, by path.", []string{"path"}, nil)
	fetchErrorsDesc = prometheus.NewDesc("zoneproxy_dynconf_fetch_errors_total",
		"Polls that failed for a reason other than a missing listener, by path.", []string{"path"}, nil)
)

// Metrics returns the poller's counters, for the agent's registry
// (metrics.Metrics.Register).
func (p *Poller) Metrics() prometheus.Collector { return pollerMetrics{p} }

type pollerMetrics struct{ p *Poller }

func (pollerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- handlerCallsDesc
	ch <- handlerErrorsDesc
	ch <- fetchErrorsDesc
}

func (c pollerMetrics) Collect(ch chan<- prometheus.Metric) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	for _, ps := range c.p.paths {
		path := metrics.LabelValue(ps.path)
		ch <- prometheus.MustNewConstMetric(handlerCallsDesc, prometheus.CounterValue, float64(ps.calls), path)
		ch <- prometheus.MustNewConstMetric(handlerErrorsDesc, prometheus.CounterValue, float64(ps.handlerErrors), path)
		ch <- prometheus.MustNewConstMetric(fetchErrorsDesc, prometheus.CounterValue, float64(ps.fetchErrors), path)
	}
}
