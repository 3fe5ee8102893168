package otlpmetrics

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
)

const awaitCeiling = 10 * time.Second

// envoyStats is what Envoy's admin /stats?format=prometheus gives.
const envoyStats = `# TYPE envoy_cluster_upstream_rq_total counter
envoy_cluster_upstream_rq_total{envoy_cluster_name="httpbin_80"} 7
envoy_cluster_upstream_rq_total{envoy_cluster_name="system_envoy_admin"} 3
# TYPE envoy_server_live gauge
envoy_server_live{} 1
# TYPE envoy_server_memory_allocated gauge
envoy_server_memory_allocated{} 1234
# TYPE envoy_server_uptime gauge
envoy_server_uptime{} 100
# TYPE my_custom_metric gauge
my_custom_metric{} 5
# TYPE envoy_cluster_upstream_rq_time histogram
envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="0.5"} 1
envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="1"} 3
envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="+Inf"} 4
envoy_cluster_upstream_rq_time_sum{envoy_cluster_name="httpbin_80"} 21.5
envoy_cluster_upstream_rq_time_count{envoy_cluster_name="httpbin_80"} 4
`

// collector stands in for Envoy's direct-mode OTLP listener: the generated
// MetricsService server, which decodes each push into the generated request.
type collector struct {
	collectorpb.UnimplementedMetricsServiceServer
	socket string
	pushes chan *collectorpb.ExportMetricsServiceRequest
	reply  *collectorpb.ExportMetricsServiceResponse
}

func (c *collector) Export(_ context.Context, req *collectorpb.ExportMetricsServiceRequest) (*collectorpb.ExportMetricsServiceResponse, error) {
	c.pushes <- req
	return c.reply, nil
}

func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "zp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startCollector(t *testing.T, socket string) *collector {
	t.Helper()
	return startCollectorReplying(t, socket, &collectorpb.ExportMetricsServiceResponse{})
}

// startCollectorReplying answers every push with reply.
func startCollectorReplying(t *testing.T, socket string, reply *collectorpb.ExportMetricsServiceResponse) *collector {
	t.Helper()
	c := &collector{socket: socket, pushes: make(chan *collectorpb.ExportMetricsServiceRequest, 1000), reply: reply}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	collectorpb.RegisterMetricsServiceServer(s, c)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return c
}

func (c *collector) await(t *testing.T) *collectorpb.ExportMetricsServiceRequest {
	t.Helper()
	select {
	case m := <-c.pushes:
		return m
	case <-time.After(awaitCeiling):
		t.Fatalf("no push to %s within %s", c.socket, awaitCeiling)
		return nil
	}
}

func (c *collector) drain() {
	for {
		select {
		case <-c.pushes:
		default:
			return
		}
	}
}

func (c *collector) expectNone(t *testing.T) {
	t.Helper()
	if n := len(c.pushes); n > 0 {
		t.Fatalf("%d unexpected pushes to %s", n, c.socket)
	}
}

// envoy serves envoyStats and tells each read's query.
type envoy struct{ reads chan string }

func newEnvoy() *envoy { return &envoy{reads: make(chan string, 1000)} }

func (e *envoy) stats(_ context.Context, query string) (string, error) {
	select {
	case e.reads <- query:
	default:
	}
	return envoyStats, nil
}

// config is a /meshmetric body with one OpenTelemetry backend per name=socket.
func config(t *testing.T, interval string, backends map[string]string) *meshmetric.Config {
	t.Helper()
	var bs []string
	for name, socket := range backends {
		bs = append(bs, `{"type":"OpenTelemetry","name":"`+name+`","openTelemetry":{"endpoint":"`+socket+`","refreshInterval":"`+interval+`"}}`)
	}
	sort.Strings(bs)
	body := `{"observability":{"metrics":{"applications":null,"backends":[{"type":"Prometheus","name":null},` + strings.Join(bs, ",") + `],
 "sidecar":{"profiles":{"appendProfiles":[{"name":"Basic"}],"exclude":[{"type":"Regex","match":"^envoy_server_.*"}],
 "include":[{"type":"Exact","match":"envoy_server_live"},{"type":"Prefix","match":"my_custom"}]},"includeUnused":true},
 "extraLabels":{"kuma.proxy_role":"zone-egress","mesh":"payments","zone":"default"}}}}`
	cfg, err := meshmetric.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newPusher(t *testing.T, e *envoy, log *zap.Logger) *Pusher {
	t.Helper()
	p, err := New(Options{Stats: e.stats, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestPushesTheProfilesEnvoyMetricsWithExtraLabels(t *testing.T) {
	dir := shortDir(t)
	c := startCollector(t, filepath.Join(dir, "kuma-otel-otel-collector.sock"))
	e := newEnvoy()
	p := newPusher(t, e, nil)
	p.Apply(config(t, "20ms", map[string]string{"otel-collector": c.socket}))

	var starts []uint64 // of the counter's point, push by push
	for range 3 {
		push := c.await(t)
		if len(push.ResourceMetrics) != 1 || len(push.ResourceMetrics[0].ScopeMetrics) != 1 {
			t.Fatalf("push shape %v; want one resource with one scope", push)
		}
		sm := push.ResourceMetrics[0].ScopeMetrics[0]
		if sm.Scope.GetName() != "kuma" {
			t.Errorf("scope %q; want kuma", sm.Scope.GetName())
		}
		var names []string
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
			if dps := m.GetSum().GetDataPoints(); m.Name == "envoy_cluster_upstream_rq_total" && len(dps) > 0 {
				starts = append(starts, dps[0].StartTimeUnixNano)
			}
			for _, attrs := range pointAttrs(m) {
				for _, want := range []string{"kuma.proxy_role=zone-egress", "mesh=payments", "zone=default"} {
					if !strings.Contains(strings.Join(attrs, " "), want) {
						t.Errorf("%s point attributes %q lack %s", m.Name, attrs, want)
					}
				}
				if strings.Contains(strings.Join(attrs, " "), "system_envoy_admin") {
					t.Errorf("%s kept the Basic profile's internal sample %q", m.Name, attrs)
				}
			}
		}
		want := []string{"envoy_cluster_upstream_rq_time", "envoy_cluster_upstream_rq_total", "envoy_server_live", "my_custom_metric"} // by name
		if !reflect.DeepEqual(names, want) {
			t.Errorf("pushed %q; want the profile's %q", names, want)
		}
	}
	// One Envoy, one start time: a moving one reads as a counter reset.
	if len(starts) != 3 || starts[0] == 0 || starts[1] != starts[0] || starts[2] != starts[0] {
		t.Errorf("the counter's start times %v; want one, non-zero, for every push", starts)
	}
	if q := <-e.reads; q != "format=prometheus&text_readouts=" {
		t.Errorf("Envoy's stats were read with %q; want no usedonly, as the config sets includeUnused", q)
	}
	out := exportsPage(t, p)
	if !strings.Contains(out.String(), `zoneproxy_otlp_exports_total{backend="otel-collector",outcome="success"} `) {
		t.Errorf("exports not counted:\n%s", out.String())
	}
}

// A backend pushes once per tick of a ticker set to its refreshInterval,
// or to kuma-dp's default when the policy gives none.
func TestPushesOncePerTickOfTheRefreshInterval(t *testing.T) {
	for _, tc := range []struct {
		refreshInterval string
		want            time.Duration
	}{{"7s", 7 * time.Second}, {"", DefaultRefreshInterval}} {
		t.Run("refreshInterval="+tc.refreshInterval, func(t *testing.T) {
			ticks, asked := make(chan time.Time), make(chan time.Duration, 1)
			original := newTicker
			newTicker = func(d time.Duration) (<-chan time.Time, func()) { asked <- d; return ticks, func() {} }
			t.Cleanup(func() { newTicker = original }) // after the pusher's Close, registered below
			c := startCollector(t, filepath.Join(shortDir(t), "c.sock"))
			p := newPusher(t, newEnvoy(), nil)
			p.Apply(config(t, tc.refreshInterval, map[string]string{"c": c.socket}))
			select {
			case d := <-asked:
				if d != tc.want {
					t.Errorf("ticker every %v; want %v", d, tc.want)
				}
			case <-time.After(awaitCeiling):
				t.Fatal("the backend never started its ticker")
			}
			for range 2 {
				ticks <- time.Now() // taken only by a backend waiting for its next tick
				c.await(t)
			}
			c.expectNone(t)
		})
	}
}

func pointAttrs(m *metricspb.Metric) [][]string {
	var out [][]string
	for _, dp := range m.GetSum().GetDataPoints() {
		out = append(out, flat(dp.Attributes))
	}
	for _, dp := range m.GetGauge().GetDataPoints() {
		out = append(out, flat(dp.Attributes))
	}
	for _, dp := range m.GetHistogram().GetDataPoints() {
		out = append(out, flat(dp.Attributes))
	}
	return out
}

func TestBackendsFollowTheConfig(t *testing.T) {
	tests := []struct {
		name string
		// change is applied once both a and b pushed; a must push after it and b not.
		change func(p *Pusher, a, b *collector)
	}{
		{"backend removed", func(p *Pusher, a, _ *collector) {
			p.Apply(config(t, "20ms", map[string]string{"a": a.socket}))
		}},
		{"policy removed, then a policy with only a", func(p *Pusher, a, _ *collector) {
			p.Apply(nil)
			p.Apply(config(t, "20ms", map[string]string{"a": a.socket}))
		}},
		{"b's endpoint moved to a's socket", func(p *Pusher, a, _ *collector) {
			p.Apply(config(t, "20ms", map[string]string{"b": a.socket}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := shortDir(t)
			a := startCollector(t, filepath.Join(dir, "a.sock"))
			b := startCollector(t, filepath.Join(dir, "b.sock"))
			p := newPusher(t, newEnvoy(), nil)
			p.Apply(config(t, "20ms", map[string]string{"a": a.socket, "b": b.socket}))
			a.await(t)
			b.await(t)

			tt.change(p, a, b)
			b.drain() // Apply returns once removed exporters have stopped
			a.drain()
			a.await(t)
			a.await(t)
			b.expectNone(t)
		})
	}
}

func TestCloseStopsPushing(t *testing.T) {
	c := startCollector(t, filepath.Join(shortDir(t), "c.sock"))
	p := newPusher(t, newEnvoy(), nil)
	p.Apply(config(t, "10ms", map[string]string{"c": c.socket}))
	c.await(t)
	p.Close()
	p.Apply(config(t, "10ms", map[string]string{"c": c.socket}))
	c.drain()
	time.Sleep(100 * time.Millisecond) // absence cannot be awaited: ten intervals
	c.expectNone(t)
}

func TestMissingSocketIsRetriedEveryIntervalAndWarnedRateLimited(t *testing.T) {
	socket := filepath.Join(shortDir(t), "kuma-otel-late.sock")
	e := newEnvoy()
	core, logs := observer.New(zapcore.WarnLevel)
	p := newPusher(t, e, zap.New(core))
	p.Apply(config(t, "20ms", map[string]string{"late": socket}))

	for range 4 { // each attempt reads Envoy's stats first
		select {
		case <-e.reads:
		case <-time.After(awaitCeiling):
			t.Fatal("no push attempt")
		}
	}
	if n := logs.FilterMessageSnippet("cannot push").Len(); n != 1 {
		t.Fatalf("%d warnings for 3 failed pushes; want 1 (rate-limited)", n)
	}
	out := exportsPage(t, p)
	if !strings.Contains(out.String(), `zoneproxy_otlp_exports_total{backend="late",outcome="failure"} `) ||
		strings.Contains(out.String(), `outcome="failure"} 0`) {
		t.Errorf("failures not counted:\n%s", out.String())
	}

	c := startCollector(t, socket)
	c.await(t)
}

// A collector that takes the push but rejects some points: the push counts
// as an export, and the rejection is warned with the collector's figures.
func TestPartialSuccessIsWarned(t *testing.T) {
	c := startCollectorReplying(t, filepath.Join(shortDir(t), "c.sock"), &collectorpb.ExportMetricsServiceResponse{
		PartialSuccess: &collectorpb.ExportMetricsPartialSuccess{RejectedDataPoints: 3, ErrorMessage: "bad name"},
	})
	core, logs := observer.New(zapcore.WarnLevel)
	p := newPusher(t, newEnvoy(), zap.New(core))
	p.Apply(config(t, "20ms", map[string]string{"c": c.socket}))
	c.await(t)
	c.await(t) // the first push has read its reply

	warned := logs.FilterMessage("OpenTelemetry backend rejected part of the metrics").
		FilterField(zap.Int64("rejected_data_points", 3)).FilterField(zap.String("message", "bad name"))
	if warned.Len() != 1 {
		t.Fatalf("warnings %v; want one naming 3 rejected points and the collector's message", logs.All())
	}
	out := exportsPage(t, p)
	if !strings.Contains(out.String(), `zoneproxy_otlp_exports_total{backend="c",outcome="failure"} 0`) ||
		strings.Contains(out.String(), `outcome="success"} 0`) {
		t.Errorf("a partial success is an export:\n%s", out.String())
	}
}

func TestNewNeedsStats(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Stats") {
		t.Fatalf("New without Stats: %v; want an error naming Stats", err)
	}
}

func TestBackendWithoutEndpointIsSkipped(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	p := newPusher(t, newEnvoy(), zap.New(core))
	cfg, err := meshmetric.Parse([]byte(`{"observability":{"metrics":{"backends":[{"type":"OpenTelemetry","name":"x","openTelemetry":{"endpoint":""}}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(cfg)
	if logs.FilterField(zap.String("field", "observability.metrics.backends[0].openTelemetry.endpoint")).Len() != 1 {
		t.Fatalf("no warning naming the field: %v", logs.All())
	}
	if len(p.running) != 0 {
		t.Fatal("a backend without endpoint was started")
	}
}
