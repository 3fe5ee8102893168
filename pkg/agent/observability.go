package agent

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
	"github.com/zoneproxy/zoneproxy/pkg/observability/accesslog"
	"github.com/zoneproxy/zoneproxy/pkg/observability/dynconf"
	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
	"github.com/zoneproxy/zoneproxy/pkg/observability/otlpmetrics"
)

// observability is the local half of Kuma's per-mesh observability
// policies, which kuma-cp leaves to the agent: the FIFO that MeshAccessLog's
// TCP backends are written to, the socket MeshMetric's Prometheus listener
// forwards scrapes to, and, once Envoy runs, the poller of Envoy's dynamic
// configuration that tells both (and the OTLP pusher) the policy in force.
type observability struct {
	log       *zap.Logger
	metrics   interface{ Register(prometheus.Collector) }
	accessLog *accesslog.Streamer
	hijacker  *meshmetric.Server
	pusher    *otlpmetrics.Pusher
	stopPoll  context.CancelFunc
	polled    chan struct{}
}

// startObservability runs before Envoy (while the bootstrap is fetched, see
// launchPrep): Envoy opens the FIFO while it builds its listeners and must
// find a reader there, not create a regular file.
func (a *Agent) startObservability(workDir string, stats func(ctx context.Context, query string) (string, error)) (*observability, error) {
	dp := a.cfg.Dataplane()
	o := &observability{log: a.log, metrics: a.opts.Metrics}
	al, err := a.up.AccessLog(accesslog.Options{
		Path: kumasock.AccessLog(workDir, dp.Name, dp.Mesh), Log: a.log.Named("accesslog"),
	})
	if err != nil {
		return nil, classify(fmt.Errorf("cannot create the access-log FIFO for MeshAccessLog: %w", err))
	}
	o.accessLog = al
	hj, err := a.up.MeshMetric(meshmetric.Options{
		Path: kumasock.MetricsHijacker(workDir, dp.Name, dp.Mesh), Stats: stats, Extra: a.opts.Metrics.WriteAgent,
	})
	if err != nil {
		o.close()
		return nil, classify(fmt.Errorf("cannot serve the MeshMetric socket: %w", err))
	}
	o.hijacker = hj
	go func() {
		<-hj.Done()
		if err := hj.Err(); err != nil {
			a.log.Error("the MeshMetric socket stopped serving; Prometheus scrapes of this proxy fail until zoneproxy restarts", zap.Error(err))
		}
	}()
	pusher, err := otlpmetrics.New(otlpmetrics.Options{Stats: stats, Log: a.log.Named("otlp")})
	if err != nil {
		o.close()
		return nil, err
	}
	o.pusher = pusher
	return o, nil
}

// register adds the access log's and the pusher's counters to /metrics,
// once Envoy is launched on them.
func (o *observability) register() {
	o.metrics.Register(o.accessLog.Metrics())
	o.metrics.Register(o.pusher.Metrics())
}

// poll follows Envoy's dynamic configuration listener until close.
func (o *observability) poll(workDir string) error {
	p, err := dynconf.New(dynconf.Options{
		Socket:   kumasock.DynamicConfig(workDir),
		Handlers: map[string]dynconf.Handler{"/meshmetric": o.applyMeshMetric},
		Log:      o.log.Named("dynconf"),
	})
	if err != nil {
		return err
	}
	o.metrics.Register(p.Metrics())
	ctx, cancel := context.WithCancel(context.Background())
	o.stopPoll, o.polled = cancel, make(chan struct{})
	go func() {
		defer close(o.polled)
		_ = p.Run(ctx)
	}()
	return nil
}

// applyMeshMetric takes the MeshMetric policy in force; nil means none (the
// policy was removed): unlike kuma-dp, which keeps the last one until a
// restart, the agent then stops filtering, labelling and pushing.
func (o *observability) applyMeshMetric(body []byte) error {
	if body == nil {
		o.hijacker.SetConfig(nil)
		o.pusher.Apply(nil)
		o.log.Info("MeshMetric policy removed: scrapes are unfiltered and OpenTelemetry pushes stop")
		return nil
	}
	cfg, err := meshmetric.Parse(body)
	if err != nil {
		o.log.Warn("ignoring a MeshMetric configuration the agent cannot read; the previous one stays", zap.Error(err))
		return err
	}
	o.hijacker.SetConfig(cfg)
	o.pusher.Apply(cfg)
	var kinds []string
	for _, b := range cfg.Backends {
		kinds = append(kinds, b.Type)
	}
	o.log.Info("MeshMetric policy applied", zap.Strings("backends", kinds))
	return nil
}

// close stops everything, the FIFO and sockets removed. Envoy is gone by now.
func (o *observability) close() {
	if o.stopPoll != nil {
		o.stopPoll()
		<-o.polled
	}
	if o.pusher != nil {
		o.pusher.Close()
	}
	if o.hijacker != nil {
		_ = o.hijacker.Close()
	}
	if o.accessLog != nil {
		if err := o.accessLog.Close(); err != nil {
			o.log.Warn("closing the access-log FIFO", zap.Error(err))
		}
	}
}
