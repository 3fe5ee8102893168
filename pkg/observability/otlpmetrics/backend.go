package otlpmetrics

import (
	"context"
	"fmt"
	"net"
	"time"

	dto "github.com/prometheus/client_model/go"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
	"github.com/zoneproxy/zoneproxy/pkg/throttle"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// warnEvery keeps a missing collector from filling the log.
const warnEvery = time.Minute

// backend pushes to one endpoint every interval until stopped.
type backend struct {
	target
	name   string
	p      *Pusher
	conn   *grpc.ClientConn
	client collectorpb.MetricsServiceClient
	cancel context.CancelFunc
	done   chan struct{}
	warn   throttle.Throttle
	epoch  envoyEpoch
}

func (p *Pusher) start(name string, t target) (*backend, error) {
	endpoint := t.endpoint
	// passthrough keeps the socket path away from URL parsing; the local
	// socket needs no TLS, and a short backoff lets a listener that shows
	// up late be used on the next push.
	conn, err := grpc.NewClient("passthrough:///localhost",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", endpoint)
		}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}),
	)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &backend{target: t, name: name, p: p, conn: conn, client: collectorpb.NewMetricsServiceClient(conn),
		cancel: cancel, done: make(chan struct{}), warn: throttle.Throttle{Every: warnEvery}}
	go b.run(ctx)
	return b, nil
}

func (b *backend) stop() {
	b.cancel()
	<-b.done
	b.conn.Close()
}

// newTicker ticks every d; tests tick by hand.
var newTicker = func(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (b *backend) run(ctx context.Context) {
	defer close(b.done)
	ticks, stop := newTicker(b.interval)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			if err := b.push(ctx); err != nil && ctx.Err() == nil {
				b.p.counted(b.name, false)
				b.warn.Warn(b.p.log, "cannot push metrics to OpenTelemetry backend; retrying next interval",
					zap.String("backend", b.name), zap.String("endpoint", b.endpoint), zap.Error(err))
			}
		}
	}
}

func (b *backend) push(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.interval)
	defer cancel()
	cfg := b.p.config()
	if cfg == nil {
		return nil
	}
	text, err := b.p.stats(ctx, statsQuery(cfg))
	if err != nil {
		return fmt.Errorf("reading Envoy stats: %w", err)
	}
	now := time.Now()
	fams, err := meshmetric.ParseText(text)
	if err != nil {
		return fmt.Errorf("parsing Envoy stats: %w", err)
	}
	start := b.epoch.start(fams, now)
	fams = cfg.Select(fams)
	if len(fams) == 0 {
		return nil
	}
	req := newConverter(cfg.ExtraLabels, now, start).request(resource(), "kuma", version.Version, fams)
	resp, err := b.client.Export(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	b.p.counted(b.name, true)
	if ps := resp.GetPartialSuccess(); ps.GetRejectedDataPoints() > 0 || ps.GetErrorMessage() != "" {
		b.warn.Warn(b.p.log, "OpenTelemetry backend rejected part of the metrics", zap.String("backend", b.name),
			zap.Int64("rejected_data_points", ps.GetRejectedDataPoints()), zap.String("message", ps.GetErrorMessage()))
	}
	return nil
}

// statsQuery is kuma-dp's admin query, without usedonly when the policy
// asks for unused stats (the hijacker's rule).
func statsQuery(cfg *meshmetric.Config) string {
	if cfg.IncludeUnused() {
		return "format=prometheus&text_readouts="
	}
	return "format=prometheus&text_readouts=&usedonly="
}

// resource names the agent; kuma-dp sends the SDK's unknown_service.
func resource() []*commonpb.KeyValue {
	return []*commonpb.KeyValue{keyValue("service.name", "zoneproxy"), keyValue("service.version", version.Version)}
}

// envoyEpoch is when the running Envoy's counters began, kept from push
// to push. OTLP reads a cumulative series whose start time changes as a
// reset: worked out anew each time from Envoy's uptime (whole seconds,
// updated at each stats flush) it would move on every push, and a
// collector's cumulative-to-delta conversion would drop the series.
type envoyEpoch struct{ at time.Time }

// epochSlack covers the uptime's whole seconds and Envoy's stats flush (5 s
// by default): a start further off than this is another Envoy.
const epochSlack = 15 * time.Second

// start is the running Envoy's start; zero (unknown to the collector)
// when Envoy does not report its uptime.
func (e *envoyEpoch) start(fams []*dto.MetricFamily, now time.Time) time.Time {
	candidate := envoyStart(fams, now)
	switch {
	case candidate.IsZero():
		*e = envoyEpoch{}
	case e.at.IsZero(), candidate.Sub(e.at) > epochSlack, e.at.Sub(candidate) > epochSlack:
		e.at = candidate // the first push, or Envoy was restarted
	}
	return e.at
}

// envoyStart is when Envoy's counters began, from its uptime gauge; zero
// when Envoy does not report it.
func envoyStart(fams []*dto.MetricFamily, now time.Time) time.Time {
	for _, f := range fams {
		if f.GetName() == "envoy_server_uptime" && len(f.Metric) > 0 {
			if up := value(f.Metric[0]); up > 0 {
				return now.Add(-time.Duration(up * float64(time.Second)))
			}
		}
	}
	return time.Time{}
}
