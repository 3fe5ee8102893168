package otlpmetrics

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/zoneproxy/zoneproxy/pkg/meshmetric"
)

const cumulative = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE

// points is what every data point of one scrape shares.
type points struct {
	extra []*commonpb.KeyValue // extraLabels, sorted by key
	now   uint64               // scrape time
	start uint64               // when Envoy's counters started; 0 if unknown
}

func newPoints(extraLabels map[string]string, now, start time.Time) points {
	p := points{now: unixNano(now), start: unixNano(start)}
	keys := make([]string, 0, len(extraLabels))
	for k := range extraLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.extra = append(p.extra, stringAttr(k, extraLabels[k]))
	}
	return p
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

func stringAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// toMetrics turns Prometheus families into OTLP metrics as kuma-dp does:
// counters become monotonic cumulative sums, gauges (and untyped) gauges,
// histograms explicit-bound histograms, summaries summaries.
func toMetrics(fams []meshmetric.Family, p points) []*metricspb.Metric {
	out := make([]*metricspb.Metric, 0, len(fams))
	for i := range fams {
		f := &fams[i]
		m := &metricspb.Metric{Name: f.Name, Description: f.Help}
		switch f.Type {
		case meshmetric.Counter:
			m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{
				IsMonotonic: true, AggregationTemporality: cumulative, DataPoints: p.numbers(f, true),
			}}
		case meshmetric.Histogram:
			m.Data = &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
				AggregationTemporality: cumulative, DataPoints: p.histograms(f),
			}}
		case meshmetric.Summary:
			m.Data = &metricspb.Metric_Summary{Summary: &metricspb.Summary{DataPoints: p.summaries(f)}}
		default:
			m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: p.numbers(f, false)}}
		}
		out = append(out, m)
	}
	return out
}

// attrs are a sample's labels, but skip, then the extra labels the sample
// does not carry itself (its own label wins, as on the Prometheus side).
func (p points) attrs(s *meshmetric.Sample, skip string) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(s.Labels)+len(p.extra))
	for _, l := range s.Labels {
		if l.Name != skip {
			out = append(out, stringAttr(l.Name, l.Value))
		}
	}
	for _, e := range p.extra {
		if _, own := s.Label(e.Key); !own {
			out = append(out, e)
		}
	}
	return out
}

func (p points) time(s *meshmetric.Sample) uint64 {
	if s.Timestamp > 0 {
		return uint64(s.Timestamp) * uint64(time.Millisecond)
	}
	return p.now
}

func (p points) numbers(f *meshmetric.Family, withStart bool) []*metricspb.NumberDataPoint {
	out := make([]*metricspb.NumberDataPoint, 0, len(f.Samples))
	for i := range f.Samples {
		s := &f.Samples[i]
		dp := &metricspb.NumberDataPoint{
			Attributes:   p.attrs(s, ""),
			TimeUnixNano: p.time(s),
			Value:        &metricspb.NumberDataPoint_AsDouble{AsDouble: s.Value},
		}
		if withStart {
			dp.StartTimeUnixNano = p.start
		}
		out = append(out, dp)
	}
	return out
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

func group(f *meshmetric.Family, by string) []*series {
	var order []*series
	index := map[string]*series{}
	for i := range f.Samples {
		s := &f.Samples[i]
		id := labelKey(s, by)
		g := index[id]
		if g == nil {
			g = &series{first: s}
			index[id] = g
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

func labelKey(s *meshmetric.Sample, skip string) string {
	var b strings.Builder
	for _, l := range s.Labels {
		if l.Name != skip {
			b.WriteString(l.Name)
			b.WriteByte(0)
			b.WriteString(l.Value)
			b.WriteByte(0)
		}
	}
	return b.String()
}

func (p points) histograms(f *meshmetric.Family) []*metricspb.HistogramDataPoint {
	var out []*metricspb.HistogramDataPoint
	for _, g := range group(f, "le") {
		var bounds []float64
		var counts []uint64
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
		counts = append(counts, nonNegative(g.count-prev)) // the +Inf bucket
		sum := g.sum
		out = append(out, &metricspb.HistogramDataPoint{
			Attributes:        p.attrs(g.first, "le"),
			StartTimeUnixNano: p.start,
			TimeUnixNano:      p.time(g.first),
			Count:             nonNegative(g.count),
			Sum:               &sum,
			BucketCounts:      counts,
			ExplicitBounds:    bounds,
		})
	}
	return out
}

func nonNegative(v float64) uint64 {
	if v < 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(v)
}

func (p points) summaries(f *meshmetric.Family) []*metricspb.SummaryDataPoint {
	var out []*metricspb.SummaryDataPoint
	for _, g := range group(f, "quantile") {
		qs := make([]*metricspb.SummaryDataPoint_ValueAtQuantile, len(g.points))
		for i, q := range g.points {
			qs[i] = &metricspb.SummaryDataPoint_ValueAtQuantile{Quantile: q.at, Value: q.value}
		}
		out = append(out, &metricspb.SummaryDataPoint{
			Attributes:        p.attrs(g.first, "quantile"),
			StartTimeUnixNano: p.start,
			TimeUnixNano:      p.time(g.first),
			Count:             nonNegative(g.count),
			Sum:               g.sum,
			QuantileValues:    qs,
		})
	}
	return out
}
