package otlpmetrics

import (
	"reflect"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
)

var (
	scrapeAt = time.Unix(1700000000, 0)
	startAt  = time.Unix(1699999000, 0)
)

// flat renders attributes as key=value strings, in order.
func flat(kvs []*commonpb.KeyValue) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key+"="+kv.Value.GetStringValue())
	}
	return out
}

// encode builds a request, encodes it as the push does and decodes the
// bytes into the generated request, as a collector would.
func encode(t *testing.T, text string) *collectorpb.ExportMetricsServiceRequest {
	t.Helper()
	fams, err := meshmetric.ParseText(text)
	if err != nil {
		t.Fatal(err)
	}
	c := newConverter(map[string]string{"mesh": "payments", "kuma.proxy_role": "zone-egress"}, scrapeAt, startAt)
	raw, err := proto.Marshal(c.request(resource(), "kuma", "1.2.3", fams))
	if err != nil {
		t.Fatal(err)
	}
	var req collectorpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		t.Fatalf("the request does not decode as an OTLP export: %v", err)
	}
	return &req
}

func convertOne(t *testing.T, text string) *metricspb.Metric {
	t.Helper()
	md := encode(t, text)
	ms := md.ResourceMetrics[0].ScopeMetrics[0].Metrics
	if len(ms) != 1 {
		t.Fatalf("got %d metrics; want 1", len(ms))
	}
	return ms[0]
}

func TestRequestCarriesTheResourceAndKumaScope(t *testing.T) {
	md := encode(t, "# TYPE g gauge\ng 1\n# TYPE c counter\nc 2\n")
	if len(md.ResourceMetrics) != 1 || len(md.ResourceMetrics[0].ScopeMetrics) != 1 {
		t.Fatalf("got %v; want one resource with one scope", md)
	}
	rm := md.ResourceMetrics[0]
	if got := flat(rm.Resource.Attributes); !reflect.DeepEqual(got, []string{"service.name=zoneproxy", "service.version=" + resource()[1].Value.GetStringValue()}) {
		t.Errorf("resource %q", got)
	}
	sm := rm.ScopeMetrics[0]
	if sm.Scope.GetName() != "kuma" || sm.Scope.GetVersion() != "1.2.3" || len(sm.Metrics) != 2 {
		t.Errorf("scope %v with %d metrics; want kuma 1.2.3 with 2", sm.Scope, len(sm.Metrics))
	}
}

func TestCountersAndGauges(t *testing.T) {
	start, now := uint64(startAt.UnixNano()), uint64(scrapeAt.UnixNano())
	tests := []struct {
		name      string
		text      string
		sum       bool // a monotonic cumulative Sum, else a Gauge
		value     float64
		attrs     []string
		time      uint64
		startTime uint64
	}{
		{
			name:  "counter",
			text:  "# TYPE envoy_cluster_upstream_rq_total counter\nenvoy_cluster_upstream_rq_total{envoy_cluster_name=\"httpbin_80\"} 7\n",
			sum:   true,
			value: 7, attrs: []string{"envoy_cluster_name=httpbin_80", "kuma.proxy_role=zone-egress", "mesh=payments"},
			time: now, startTime: start,
		},
		{
			name:  "counter at zero",
			text:  "# TYPE c counter\nc 0\n",
			sum:   true,
			value: 0, attrs: []string{"kuma.proxy_role=zone-egress", "mesh=payments"},
			time: now, startTime: start,
		},
		{
			name:  "gauge",
			text:  "# TYPE envoy_server_live gauge\nenvoy_server_live{} 1\n",
			value: 1, attrs: []string{"kuma.proxy_role=zone-egress", "mesh=payments"}, time: now,
		},
		{
			name:  "untyped is a gauge",
			text:  "my_custom_metric 5\n",
			value: 5, attrs: []string{"kuma.proxy_role=zone-egress", "mesh=payments"}, time: now,
		},
		{
			name:  "the sample's own label wins over an extra label",
			text:  "# TYPE g gauge\ng{mesh=\"other\"} 2\n",
			value: 2, attrs: []string{"mesh=other", "kuma.proxy_role=zone-egress"}, time: now,
		},
		{
			name:  "the sample's timestamp is kept",
			text:  "# TYPE g gauge\ng 3 1600000000123\n",
			value: 3, attrs: []string{"kuma.proxy_role=zone-egress", "mesh=payments"}, time: 1600000000123 * uint64(time.Millisecond),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := convertOne(t, tt.text)
			var dps []*metricspb.NumberDataPoint
			if tt.sum {
				s := m.GetSum()
				if s == nil || !s.IsMonotonic || s.AggregationTemporality != cumulative {
					t.Fatalf("got %v; want a monotonic cumulative sum", m.Data)
				}
				dps = s.DataPoints
			} else {
				if m.GetGauge() == nil {
					t.Fatalf("got %v; want a gauge", m.Data)
				}
				dps = m.GetGauge().DataPoints
			}
			if len(dps) != 1 {
				t.Fatalf("%d data points; want 1", len(dps))
			}
			dp := dps[0]
			if _, ok := dp.Value.(*metricspb.NumberDataPoint_AsDouble); !ok {
				t.Errorf("value %v; want as_double set", dp.Value)
			}
			if dp.GetAsDouble() != tt.value || dp.TimeUnixNano != tt.time || dp.StartTimeUnixNano != tt.startTime {
				t.Errorf("point value %v time %d start %d; want %v %d %d", dp.GetAsDouble(), dp.TimeUnixNano, dp.StartTimeUnixNano, tt.value, tt.time, tt.startTime)
			}
			if got := flat(dp.Attributes); !reflect.DeepEqual(got, tt.attrs) {
				t.Errorf("attributes %q; want %q", got, tt.attrs)
			}
		})
	}
}

func TestHistogramsHaveExplicitBoundsAndPerBucketCounts(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		bounds []float64
		counts []uint64
		count  uint64
		sum    float64
	}{
		{
			name: "Envoy's shape",
			text: `# TYPE rq_time histogram
rq_time_bucket{c="a",le="0.5"} 1
rq_time_bucket{c="a",le="1"} 3
rq_time_bucket{c="a",le="+Inf"} 4
rq_time_sum{c="a"} 21.5
rq_time_count{c="a"} 4
`,
			bounds: []float64{0.5, 1}, counts: []uint64{1, 2, 1}, count: 4, sum: 21.5,
		},
		{
			name: "buckets out of order and no +Inf bucket",
			text: `# TYPE rq_time histogram
rq_time_bucket{c="a",le="10"} 5
rq_time_bucket{c="a",le="1"} 2
rq_time_count{c="a"} 6
rq_time_sum{c="a"} 30
`,
			bounds: []float64{1, 10}, counts: []uint64{2, 3, 1}, count: 6, sum: 30,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := convertOne(t, tt.text).GetHistogram()
			if h == nil || h.AggregationTemporality != cumulative || len(h.DataPoints) != 1 {
				t.Fatalf("got %v; want one cumulative histogram point", h)
			}
			dp := h.DataPoints[0]
			if !reflect.DeepEqual(dp.ExplicitBounds, tt.bounds) || !reflect.DeepEqual(dp.BucketCounts, tt.counts) ||
				dp.Count != tt.count || dp.GetSum() != tt.sum {
				t.Errorf("bounds %v counts %v count %d sum %v; want %v %v %d %v",
					dp.ExplicitBounds, dp.BucketCounts, dp.Count, dp.GetSum(), tt.bounds, tt.counts, tt.count, tt.sum)
			}
			if got, want := flat(dp.Attributes), []string{"c=a", "kuma.proxy_role=zone-egress", "mesh=payments"}; !reflect.DeepEqual(got, want) {
				t.Errorf("attributes %q; want %q (no le)", got, want)
			}
		})
	}
}

func TestHistogramSeriesAreSeparatedByLabels(t *testing.T) {
	h := convertOne(t, `# TYPE t histogram
t_bucket{c="a",le="1"} 1
t_bucket{c="a",le="+Inf"} 1
t_sum{c="a"} 0.5
t_count{c="a"} 1
t_bucket{c="b",le="1"} 0
t_bucket{c="b",le="+Inf"} 2
t_sum{c="b"} 9
t_count{c="b"} 2
`).GetHistogram()
	if len(h.DataPoints) != 2 {
		t.Fatalf("%d points; want one per cluster", len(h.DataPoints))
	}
	b := h.DataPoints[1]
	if flat(b.Attributes)[0] != "c=b" || !reflect.DeepEqual(b.BucketCounts, []uint64{0, 2}) || b.GetSum() != 9 {
		t.Errorf("second series %v", b)
	}
}

func TestSummaries(t *testing.T) {
	s := convertOne(t, `# TYPE lat summary
lat{c="a",quantile="0.99"} 8
lat{c="a",quantile="0.5"} 2
lat_sum{c="a"} 40
lat_count{c="a"} 10
`).GetSummary()
	if s == nil || len(s.DataPoints) != 1 {
		t.Fatalf("got %v; want one summary point", s)
	}
	dp := s.DataPoints[0]
	qs := dp.QuantileValues
	if dp.Count != 10 || dp.Sum != 40 || len(qs) != 2 || qs[0].Quantile != 0.5 || qs[0].Value != 2 || qs[1].Quantile != 0.99 || qs[1].Value != 8 {
		t.Errorf("got %v", dp)
	}
	if got, want := flat(dp.Attributes), []string{"c=a", "kuma.proxy_role=zone-egress", "mesh=payments"}; !reflect.DeepEqual(got, want) {
		t.Errorf("attributes %q; want %q (no quantile)", got, want)
	}
	if dp.StartTimeUnixNano != uint64(startAt.UnixNano()) || dp.TimeUnixNano != uint64(scrapeAt.UnixNano()) {
		t.Errorf("start %d time %d", dp.StartTimeUnixNano, dp.TimeUnixNano)
	}
}

func TestEnvoyStartComesFromItsUptime(t *testing.T) {
	fams, err := meshmetric.ParseText("# TYPE envoy_server_uptime gauge\nenvoy_server_uptime{} 100\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := envoyStart(fams, scrapeAt); !got.Equal(scrapeAt.Add(-100 * time.Second)) {
		t.Errorf("start %v; want 100 s before %v", got, scrapeAt)
	}
	if got := envoyStart(nil, scrapeAt); !got.IsZero() {
		t.Errorf("start %v without uptime; want zero", got)
	}
	if unixNano(time.Time{}) != 0 {
		t.Error("an unknown start must be sent as 0")
	}
}

// One Envoy's series keep one start time from push to push, although its
// uptime moves in whole seconds at each stats flush; a restarted Envoy
// gets its own.
func TestEnvoyStartStaysPutAcrossPushes(t *testing.T) {
	uptime := func(s string) []*dto.MetricFamily {
		fams, err := meshmetric.ParseText("# TYPE envoy_server_uptime gauge\nenvoy_server_uptime{} " + s + "\n")
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	var e envoyEpoch
	first := e.start(uptime("100"), scrapeAt)
	for _, push := range []struct {
		after time.Duration
		up    string
	}{{300 * time.Millisecond, "100"}, {600 * time.Millisecond, "100"}, {5 * time.Second, "105"}, {9900 * time.Millisecond, "109"}} {
		if got := e.start(uptime(push.up), scrapeAt.Add(push.after)); !got.Equal(first) {
			t.Errorf("push %v later (uptime %s): start %v, want %v as before", push.after, push.up, got, first)
		}
	}
	restarted := e.start(uptime("2"), scrapeAt.Add(time.Minute))
	if want := scrapeAt.Add(time.Minute - 2*time.Second); !restarted.Equal(want) {
		t.Errorf("after a restart: start %v, want %v", restarted, want)
	}
	if got := e.start(nil, scrapeAt.Add(2*time.Minute)); !got.IsZero() {
		t.Errorf("without uptime: start %v, want zero", got)
	}
}
