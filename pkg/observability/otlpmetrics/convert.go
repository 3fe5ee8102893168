package otlpmetrics

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
)

const cumulative = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE

// converter builds one scrape's export request.
type converter struct {
	extra []*commonpb.KeyValue // extraLabels by key, unchanged (kuma.proxy_role keeps its dot); shared by the points
	now   uint64               // scrape time
	start uint64               // when Envoy's counters started; 0 if unknown
	key   []byte               // scratch for a series' identity
}

func newConverter(extraLabels map[string]string, now, start time.Time) *converter {
	c := &converter{now: unixNano(now), start: unixNano(start)}
	for k, v := range extraLabels {
		c.extra = append(c.extra, keyValue(k, v))
	}
	sort.Slice(c.extra, func(i, j int) bool { return c.extra[i].Key < c.extra[j].Key })
	return c
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

func keyValue(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// request is the export with one resource and the scope "kuma", as kuma-dp
// sends: counters become monotonic cumulative sums, gauges (and untyped)
// gauges, histograms explicit-bound histograms, summaries summaries.
func (c *converter) request(resource []meshmetric.Label, scopeName, scopeVersion string, fams []meshmetric.Family) *collectorpb.ExportMetricsServiceRequest {
	res := make([]*commonpb.KeyValue, len(resource))
	for i, a := range resource {
		res[i] = keyValue(a.Name, a.Value)
	}
	ms := make([]*metricspb.Metric, len(fams))
	for i := range fams {
		ms[i] = c.metric(&fams[i])
	}
	return &collectorpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: res},
		ScopeMetrics: []*metricspb.ScopeMetrics{{
			Scope:   &commonpb.InstrumentationScope{Name: scopeName, Version: scopeVersion},
			Metrics: ms,
		}},
	}}}
}

func (c *converter) metric(f *meshmetric.Family) *metricspb.Metric {
	m := &metricspb.Metric{Name: f.Name, Description: f.Help}
	switch f.Type {
	case meshmetric.Counter:
		m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{
			DataPoints: c.numbers(f, c.start), AggregationTemporality: cumulative, IsMonotonic: true,
		}}
	case meshmetric.Histogram:
		h := &metricspb.Histogram{AggregationTemporality: cumulative}
		for _, g := range c.group(f, "le") {
			h.DataPoints = append(h.DataPoints, c.histogram(g))
		}
		m.Data = &metricspb.Metric_Histogram{Histogram: h}
	case meshmetric.Summary:
		s := &metricspb.Summary{}
		for _, g := range c.group(f, "quantile") {
			s.DataPoints = append(s.DataPoints, c.summary(g))
		}
		m.Data = &metricspb.Metric_Summary{Summary: s}
	default:
		m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: c.numbers(f, 0)}}
	}
	return m
}

// numbers are f's samples as points, with start as their start time.
func (c *converter) numbers(f *meshmetric.Family, start uint64) []*metricspb.NumberDataPoint {
	out := make([]*metricspb.NumberDataPoint, len(f.Samples))
	for i := range f.Samples {
		s := &f.Samples[i]
		out[i] = &metricspb.NumberDataPoint{
			Attributes:        c.attrs(s, ""),
			StartTimeUnixNano: start,
			TimeUnixNano:      c.time(s),
			Value:             &metricspb.NumberDataPoint_AsDouble{AsDouble: s.Value},
		}
	}
	return out
}

// attrs are a sample's labels but skip, then the extra labels the sample
// does not carry itself (its own label wins, as on the Prometheus side).
func (c *converter) attrs(s *meshmetric.Sample, skip string) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(s.Labels)+len(c.extra))
	for _, l := range s.Labels {
		if l.Name != skip {
			out = append(out, keyValue(l.Name, l.Value))
		}
	}
	for _, x := range c.extra {
		if _, own := s.Label(x.Key); !own {
			out = append(out, x)
		}
	}
	return out
}

func (c *converter) time(s *meshmetric.Sample) uint64 {
	if s.Timestamp > 0 {
		return uint64(s.Timestamp) * uint64(time.Millisecond)
	}
	return c.now
}

// series gathers the samples of one histogram or summary series: those
// with the same labels apart from le or quantile.
type series struct {
	first      *meshmetric.Sample
	points     []point // by le or quantile, ascending
	sum, count float64
	hasCount   bool
}

// point is a bucket (le, cumulative count) or a quantile (q, value).
type point struct{ at, value float64 }

func (c *converter) group(f *meshmetric.Family, by string) []*series {
	var order []*series
	index := map[string]*series{}
	for i := range f.Samples {
		s := &f.Samples[i]
		c.key = labelKey(c.key[:0], s, by)
		g := index[string(c.key)]
		if g == nil {
			g = &series{first: s}
			index[string(c.key)] = g
			order = append(order, g)
		}
		switch strings.TrimPrefix(s.Name, f.Name) {
		case "_sum":
			g.sum = s.Value
		case "_count":
			g.count, g.hasCount = s.Value, true
		default: // _bucket, or a summary's quantile line
			v, ok := s.Label(by)
			k, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				continue
			}
			g.points = append(g.points, point{k, s.Value})
		}
	}
	for _, g := range order {
		slices.SortStableFunc(g.points, func(a, b point) int { return cmp.Compare(a.at, b.at) })
	}
	return order
}

// labelKey appends a series' identity: its labels but skip.
func labelKey(b []byte, s *meshmetric.Sample, skip string) []byte {
	for _, l := range s.Labels {
		if l.Name != skip {
			b = append(b, l.Name...)
			b = append(b, 0)
			b = append(b, l.Value...)
			b = append(b, 0)
		}
	}
	return b
}

// histogram turns Prometheus' cumulative buckets into OTLP's per-bucket
// counts, the last one for +Inf.
func (c *converter) histogram(g *series) *metricspb.HistogramDataPoint {
	bounds := make([]float64, 0, len(g.points))
	counts := make([]uint64, 0, len(g.points)+1)
	var prev float64
	infSeen := false
	for _, b := range g.points {
		if math.IsInf(b.at, 1) {
			infSeen = true
			if !g.hasCount {
				g.count = b.value
			}
			break
		}
		bounds = append(bounds, b.at)
		counts = append(counts, nonNegative(b.value-prev))
		prev = b.value
	}
	if !g.hasCount && !infSeen {
		g.count = prev
	}
	counts = append(counts, nonNegative(g.count-prev))
	return &metricspb.HistogramDataPoint{
		Attributes:        c.attrs(g.first, "le"),
		StartTimeUnixNano: c.start,
		TimeUnixNano:      c.time(g.first),
		Count:             nonNegative(g.count),
		Sum:               &g.sum, // optional: sent even when 0
		BucketCounts:      counts,
		ExplicitBounds:    bounds,
	}
}

func nonNegative(v float64) uint64 {
	if v < 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(v)
}

func (c *converter) summary(g *series) *metricspb.SummaryDataPoint {
	p := &metricspb.SummaryDataPoint{
		Attributes:        c.attrs(g.first, "quantile"),
		StartTimeUnixNano: c.start,
		TimeUnixNano:      c.time(g.first),
		Count:             nonNegative(g.count),
		Sum:               g.sum,
	}
	for _, q := range g.points {
		p.QuantileValues = append(p.QuantileValues, &metricspb.SummaryDataPoint_ValueAtQuantile{Quantile: q.at, Value: q.value})
	}
	return p
}
