// Package otlpmetrics pushes MeshMetric's OpenTelemetry backends in direct
// mode: for each OpenTelemetry backend of the /meshmetric config, every
// refreshInterval, it reads Envoy's stats, applies the config's profile and
// sends OTLP/gRPC MetricsService/Export to the backend's endpoint, a Unix
// socket where Envoy's listener forwards to the collector.
//
// As kuma-dp: scope "kuma" with the agent's version, extraLabels as
// data-point attributes, cumulative temporality. Unlike kuma-dp there is no
// second copy of the metrics through a Prometheus bridge, and the resource
// names zoneproxy instead of the SDK's unknown_service.
//
// The request is built with go.opentelemetry.io/proto/otlp's generated
// types and sent with its generated MetricsService client, the same
// messages the OpenTelemetry SDK's OTLP/gRPC exporter sends for kuma-dp.
// The collector package also links grpc-gateway's runtime for its HTTP
// handlers, unused here (0.1 MiB of the stripped binary).
package otlpmetrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
)

// DefaultRefreshInterval is MeshMetric's default for OpenTelemetry backends.
const DefaultRefreshInterval = time.Minute

// Options configure a Pusher.
type Options struct {
	// Stats performs GET /stats?<query> on Envoy's admin API and returns
	// the body, as for meshmetric.Options.Stats.
	Stats func(ctx context.Context, query string) (string, error)
	Log   *zap.Logger
}

// Pusher runs one exporter per OpenTelemetry backend of the applied config.
type Pusher struct {
	stats func(ctx context.Context, query string) (string, error)
	log   *zap.Logger

	applying sync.Mutex // serialises Apply and Close; guards running and closed
	running  map[string]*backend
	closed   bool

	mu  sync.Mutex // guards what exporters read: cfg
	cfg *meshmetric.Config

	exports *prometheus.CounterVec // by backend and outcome
}

// New checks the options; nothing is pushed until Apply.
func New(o Options) (*Pusher, error) {
	if o.Stats == nil {
		return nil, errors.New("otlpmetrics: Stats is nil; pass a function reading Envoy's admin /stats")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	exports := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zoneproxy_otlp_exports_total", Help: "OTLP metric exports by OpenTelemetry backend and outcome.",
	}, []string{"backend", "outcome"})
	return &Pusher{stats: o.Stats, log: o.Log, running: map[string]*backend{}, exports: exports}, nil
}

// target is what a running exporter was started with.
type target struct {
	endpoint string
	interval time.Duration
}

// Apply makes the running exporters match cfg's OpenTelemetry backends:
// new ones start, removed ones stop, changed ones restart. A nil cfg (no
// policy) stops them all. The profile and labels apply from the next push.
func (p *Pusher) Apply(cfg *meshmetric.Config) {
	want := p.targets(cfg)
	p.applying.Lock()
	defer p.applying.Unlock()
	if p.closed {
		return
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	for name, b := range p.running {
		if t, ok := want[name]; !ok || t != b.target {
			b.stop()
			delete(p.running, name)
			p.log.Info("stopped OpenTelemetry metrics backend", zap.String("backend", name))
		}
	}
	for name, t := range want {
		if p.running[name] != nil {
			continue
		}
		b, err := p.start(name, t)
		if err != nil {
			p.log.Warn("cannot start OpenTelemetry metrics backend", zap.String("backend", name), zap.Error(err))
			continue
		}
		p.running[name] = b
		p.log.Info("pushing metrics to OpenTelemetry backend", zap.String("backend", name),
			zap.String("endpoint", t.endpoint), zap.Duration("every", t.interval))
	}
}

// targets are cfg's usable OpenTelemetry backends by name.
func (p *Pusher) targets(cfg *meshmetric.Config) map[string]target {
	want := map[string]target{}
	if cfg == nil {
		return want
	}
	for i, b := range cfg.Backends {
		if b.Type != "OpenTelemetry" {
			continue
		}
		name := ""
		if b.Name != nil {
			name = *b.Name
		}
		if b.OpenTelemetry == nil || b.OpenTelemetry.Endpoint == "" {
			p.log.Warn("ignoring OpenTelemetry metrics backend without an endpoint",
				zap.String("field", fmt.Sprintf("observability.metrics.backends[%d].openTelemetry.endpoint", i)), zap.String("backend", name))
			continue
		}
		if name == "" {
			name = b.OpenTelemetry.Endpoint
		}
		interval := time.Duration(b.OpenTelemetry.RefreshInterval)
		if interval <= 0 {
			interval = DefaultRefreshInterval
		}
		want[name] = target{endpoint: b.OpenTelemetry.Endpoint, interval: interval}
	}
	return want
}

// config is the config the next push uses.
func (p *Pusher) config() *meshmetric.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// counted counts one export to the backend name; a backend's first shows
// both outcomes, the other at 0.
func (p *Pusher) counted(name string, ok bool) {
	name = metrics.LabelValue(name)
	success, failure := p.exports.WithLabelValues(name, "success"), p.exports.WithLabelValues(name, "failure")
	if ok {
		success.Inc()
	} else {
		failure.Inc()
	}
}

// Close stops every exporter; Apply does nothing afterwards.
func (p *Pusher) Close() {
	p.applying.Lock()
	defer p.applying.Unlock()
	p.closed = true
	for name, b := range p.running {
		b.stop()
		delete(p.running, name)
	}
}

// Metrics returns the export counts, for the agent's registry
// (metrics.Metrics.Register).
func (p *Pusher) Metrics() prometheus.Collector { return p.exports }
