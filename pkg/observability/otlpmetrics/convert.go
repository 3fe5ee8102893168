package otlpmetrics

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

const cumulative = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE

// converter builds one scrape's export request.
type converter struct {
	extra []*commonpb.KeyValue // extraLabels by key, unchanged (kuma.proxy_role keeps its dot); shared by the points
	now   uint64               // scrape time
	start uint64               // when Envoy's counters started; 0 if unknown
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
func (c *converter) request(resource []*commonpb.KeyValue, scopeName, scopeVersion string, fams []*dto.MetricFamily) *collectorpb.ExportMetricsServiceRequest {
	ms := make([]*metricspb.Metric, len(fams))
	for i, f := range fams {
		ms[i] = c.metric(f)
	}
	return &collectorpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: resource},
		ScopeMetrics: []*metricspb.ScopeMetrics{{
			Scope:   &commonpb.InstrumentationScope{Name: scopeName, Version: scopeVersion},
			Metrics: ms,
		}},
	}}}
}

func (c *converter) metric(f *dto.MetricFamily) *metricspb.Metric {
	m := &metricspb.Metric{Name: f.GetName(), Description: f.GetHelp()}
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{
			DataPoints: c.numbers(f, c.start), AggregationTemporality: cumulative, IsMonotonic: true,
		}}
	case dto.MetricType_HISTOGRAM:
		h := &metricspb.Histogram{AggregationTemporality: cumulative}
		for _, p := range f.Metric {
			h.DataPoints = append(h.DataPoints, c.histogram(p))
		}
		m.Data = &metricspb.Metric_Histogram{Histogram: h}
	case dto.MetricType_SUMMARY:
		s := &metricspb.Summary{}
		for _, p := range f.Metric {
			s.DataPoints = append(s.DataPoints, c.summary(p))
		}
		m.Data = &metricspb.Metric_Summary{Summary: s}
	default:
		m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: c.numbers(f, 0)}}
	}
	return m
}

// numbers are f's samples as points, with start as their start time.
func (c *converter) numbers(f *dto.MetricFamily, start uint64) []*metricspb.NumberDataPoint {
	out := make([]*metricspb.NumberDataPoint, len(f.Metric))
	for i, p := range f.Metric {
		out[i] = &metricspb.NumberDataPoint{
			Attributes:        c.attrs(p),
			StartTimeUnixNano: start,
			TimeUnixNano:      c.time(p),
			Value:             &metricspb.NumberDataPoint_AsDouble{AsDouble: value(p)},
		}
	}
	return out
}

// value is a counter's, gauge's or untyped sample's value.
func value(p *dto.Metric) float64 {
	switch {
	case p.Counter != nil:
		return p.Counter.GetValue()
	case p.Gauge != nil:
		return p.Gauge.GetValue()
	}
	return p.GetUntyped().GetValue()
}

// attrs are a sample's labels, then the extra labels the sample does not
// carry itself (its own label wins, as on the Prometheus side).
func (c *converter) attrs(p *dto.Metric) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(p.Label)+len(c.extra))
	for _, l := range p.Label {
		out = append(out, keyValue(l.GetName(), l.GetValue()))
	}
	for _, x := range c.extra {
		if !slices.ContainsFunc(p.Label, func(l *dto.LabelPair) bool { return l.GetName() == x.Key }) {
			out = append(out, x)
		}
	}
	return out
}

func (c *converter) time(p *dto.Metric) uint64 {
	if ts := p.GetTimestampMs(); ts > 0 {
		return uint64(ts) * uint64(time.Millisecond)
	}
	return c.now
}

// histogram turns Prometheus' cumulative buckets into OTLP's per-bucket
// counts, the last one for +Inf. The text parser keeps whole counts as
// integers and any fractional ones as floats; one of each pair is zero.
func (c *converter) histogram(p *dto.Metric) *metricspb.HistogramDataPoint {
	h := p.GetHistogram()
	buckets := slices.SortedFunc(slices.Values(h.Bucket), func(a, b *dto.Bucket) int {
		return cmp.Compare(a.GetUpperBound(), b.GetUpperBound())
	})
	count := float64(h.GetSampleCount()) + h.GetSampleCountFloat()
	bounds := make([]float64, 0, len(buckets))
	counts := make([]uint64, 0, len(buckets)+1)
	var prev float64
	for _, b := range buckets {
		if math.IsInf(b.GetUpperBound(), 1) {
			break
		}
		cumulative := float64(b.GetCumulativeCount()) + b.GetCumulativeCountFloat()
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, nonNegative(cumulative-prev))
		prev = cumulative
	}
	counts = append(counts, nonNegative(count-prev))
	sum := h.GetSampleSum()
	return &metricspb.HistogramDataPoint{
		Attributes:        c.attrs(p),
		StartTimeUnixNano: c.start,
		TimeUnixNano:      c.time(p),
		Count:             nonNegative(count),
		Sum:               &sum, // optional: sent even when 0
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

func (c *converter) summary(p *dto.Metric) *metricspb.SummaryDataPoint {
	s := p.GetSummary()
	quantiles := slices.SortedFunc(slices.Values(s.Quantile), func(a, b *dto.Quantile) int {
		return cmp.Compare(a.GetQuantile(), b.GetQuantile())
	})
	dp := &metricspb.SummaryDataPoint{
		Attributes:        c.attrs(p),
		StartTimeUnixNano: c.start,
		TimeUnixNano:      c.time(p),
		Count:             s.GetSampleCount(),
		Sum:               s.GetSampleSum(),
	}
	for _, q := range quantiles {
		dp.QuantileValues = append(dp.QuantileValues, &metricspb.SummaryDataPoint_ValueAtQuantile{Quantile: q.GetQuantile(), Value: q.GetValue()})
	}
	return dp
}
