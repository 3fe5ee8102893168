package otlpmetrics

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/zoneproxy/zoneproxy/pkg/meshmetric"
)

// Field numbers of opentelemetry/proto/{metrics,common,resource}/v1. The
// request is encoded straight from the parsed families: building the
// generated messages first cost ten times the bytes and allocations.
const (
	fResourceMetrics = 1 // MetricsData, ExportMetricsServiceRequest
	fResource        = 1 // ResourceMetrics
	fScopeMetrics    = 2
	fAttributes      = 1 // Resource
	fScope           = 1 // ScopeMetrics
	fMetrics         = 2
	fScopeName       = 1 // InstrumentationScope
	fScopeVersion    = 2
	fName            = 1 // Metric
	fDescription     = 2
	fGauge           = 5
	fSum             = 7
	fHistogram       = 9
	fSummary         = 11
	fDataPoints      = 1 // Gauge, Sum, Histogram, Summary
	fTemporality     = 2 // Sum, Histogram
	fMonotonic       = 3 // Sum
	fStartTime       = 2 // every data point
	fTime            = 3
	fNumberAttrs     = 7 // NumberDataPoint
	fAsDouble        = 4
	fHistAttrs       = 9 // HistogramDataPoint
	fCount           = 4 // HistogramDataPoint, SummaryDataPoint
	fHistSum         = 5
	fBucketCounts    = 6
	fBounds          = 7
	fSummaryAttrs    = 7 // SummaryDataPoint
	fSummarySum      = 5
	fQuantiles       = 6
	fQuantile        = 1 // ValueAtQuantile
	fQuantileValue   = 2
	fKey             = 1 // KeyValue
	fValue           = 2
	fStringValue     = 1 // AnyValue

	cumulative = 2 // AGGREGATION_TEMPORALITY_CUMULATIVE
)

// points is what every data point of one scrape shares.
type points struct {
	extra []meshmetric.Label // extraLabels by key, unchanged (kuma.proxy_role keeps its dot)
	now   uint64             // scrape time
	start uint64             // when Envoy's counters started; 0 if unknown
}

func newPoints(extraLabels map[string]string, now, start time.Time) points {
	p := points{now: unixNano(now), start: unixNano(start)}
	for k, v := range extraLabels {
		p.extra = append(p.extra, meshmetric.Label{Name: k, Value: v})
	}
	sort.Slice(p.extra, func(i, j int) bool { return p.extra[i].Name < p.extra[j].Name })
	return p
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

// encoder appends an export request. Its scratch buffers, one per nesting
// level, are kept between pushes.
type encoder struct {
	points
	scope, metric, agg, point, key []byte
	bounds                         []float64
	counts                         []uint64
}

// request encodes MetricsData (wire-identical to ExportMetricsServiceRequest)
// with one resource and the scope "kuma", as kuma-dp sends: counters become
// monotonic cumulative sums, gauges (and untyped) gauges, histograms
// explicit-bound histograms, summaries summaries.
func (e *encoder) request(dst []byte, resource []meshmetric.Label, scopeName, scopeVersion string, fams []meshmetric.Family) []byte {
	e.scope = e.scope[:0]
	var sc []byte
	sc = appendString(sc, fScopeName, scopeName)
	sc = appendString(sc, fScopeVersion, scopeVersion)
	e.scope = appendMessage(e.scope, fScope, sc)
	for i := range fams {
		e.scope = appendMessage(e.scope, fMetrics, e.encodeMetric(&fams[i]))
	}

	var res []byte
	for _, a := range resource {
		res = appendKeyValue(res, fAttributes, a.Name, a.Value)
	}
	rmSize := protowire.SizeTag(fResource) + protowire.SizeBytes(len(res)) +
		protowire.SizeTag(fScopeMetrics) + protowire.SizeBytes(len(e.scope))
	dst = protowire.AppendTag(dst, fResourceMetrics, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(rmSize))
	dst = appendMessage(dst, fResource, res)
	return appendMessage(dst, fScopeMetrics, e.scope)
}

func (e *encoder) encodeMetric(f *meshmetric.Family) []byte {
	e.agg = e.agg[:0]
	field := fGauge
	switch f.Type {
	case meshmetric.Counter:
		field = fSum
		for i := range f.Samples {
			e.agg = appendMessage(e.agg, fDataPoints, e.number(&f.Samples[i], e.start))
		}
		e.agg = protowire.AppendTag(e.agg, fTemporality, protowire.VarintType)
		e.agg = protowire.AppendVarint(e.agg, cumulative)
		e.agg = protowire.AppendTag(e.agg, fMonotonic, protowire.VarintType)
		e.agg = protowire.AppendVarint(e.agg, 1)
	case meshmetric.Histogram:
		field = fHistogram
		for _, g := range e.group(f, "le") {
			e.agg = appendMessage(e.agg, fDataPoints, e.histogram(g))
		}
		e.agg = protowire.AppendTag(e.agg, fTemporality, protowire.VarintType)
		e.agg = protowire.AppendVarint(e.agg, cumulative)
	case meshmetric.Summary:
		field = fSummary
		for _, g := range e.group(f, "quantile") {
			e.agg = appendMessage(e.agg, fDataPoints, e.summary(g))
		}
	default:
		for i := range f.Samples {
			e.agg = appendMessage(e.agg, fDataPoints, e.number(&f.Samples[i], 0))
		}
	}
	e.metric = appendString(e.metric[:0], fName, f.Name)
	e.metric = appendString(e.metric, fDescription, f.Help)
	e.metric = appendMessage(e.metric, protowire.Number(field), e.agg)
	return e.metric
}

func (e *encoder) number(s *meshmetric.Sample, start uint64) []byte {
	b := e.attrs(e.point[:0], fNumberAttrs, s, "")
	b = appendFixed64(b, fStartTime, start)
	b = appendFixed64(b, fTime, e.time(s))
	b = protowire.AppendTag(b, fAsDouble, protowire.Fixed64Type) // a oneof: sent even when 0
	e.point = protowire.AppendFixed64(b, math.Float64bits(s.Value))
	return e.point
}

// attrs appends a sample's labels but skip, then the extra labels the
// sample does not carry itself (its own label wins, as on the Prometheus
// side).
func (e *encoder) attrs(b []byte, field protowire.Number, s *meshmetric.Sample, skip string) []byte {
	for _, l := range s.Labels {
		if l.Name != skip {
			b = appendKeyValue(b, field, l.Name, l.Value)
		}
	}
	for _, x := range e.extra {
		if _, own := s.Label(x.Name); !own {
			b = appendKeyValue(b, field, x.Name, x.Value)
		}
	}
	return b
}

func (e *encoder) time(s *meshmetric.Sample) uint64 {
	if s.Timestamp > 0 {
		return uint64(s.Timestamp) * uint64(time.Millisecond)
	}
	return e.now
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

func (e *encoder) group(f *meshmetric.Family, by string) []*series {
	var order []*series
	index := map[string]*series{}
	for i := range f.Samples {
		s := &f.Samples[i]
		e.key = labelKey(e.key[:0], s, by)
		g := index[string(e.key)]
		if g == nil {
			g = &series{first: s}
			index[string(e.key)] = g
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
func (e *encoder) histogram(g *series) []byte {
	bounds, counts := e.bounds[:0], e.counts[:0]
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
	e.bounds, e.counts = bounds, counts

	b := e.attrs(e.point[:0], fHistAttrs, g.first, "le")
	b = appendFixed64(b, fStartTime, e.start)
	b = appendFixed64(b, fTime, e.time(g.first))
	b = protowire.AppendTag(b, fCount, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, nonNegative(g.count))
	b = protowire.AppendTag(b, fHistSum, protowire.Fixed64Type) // optional: sent even when 0
	b = protowire.AppendFixed64(b, math.Float64bits(g.sum))
	b = protowire.AppendTag(b, fBucketCounts, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(8*len(counts)))
	for _, c := range counts {
		b = protowire.AppendFixed64(b, c)
	}
	if len(bounds) > 0 {
		b = protowire.AppendTag(b, fBounds, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(8*len(bounds)))
		for _, x := range bounds {
			b = protowire.AppendFixed64(b, math.Float64bits(x))
		}
	}
	e.point = b
	return b
}

func nonNegative(v float64) uint64 {
	if v < 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(v)
}

func (e *encoder) summary(g *series) []byte {
	b := e.attrs(e.point[:0], fSummaryAttrs, g.first, "quantile")
	b = appendFixed64(b, fStartTime, e.start)
	b = appendFixed64(b, fTime, e.time(g.first))
	b = appendFixed64(b, fCount, nonNegative(g.count))
	b = appendFixed64(b, fSummarySum, math.Float64bits(g.sum))
	for _, q := range g.points {
		var vq []byte
		vq = protowire.AppendTag(vq, fQuantile, protowire.Fixed64Type)
		vq = protowire.AppendFixed64(vq, math.Float64bits(q.at))
		vq = protowire.AppendTag(vq, fQuantileValue, protowire.Fixed64Type)
		vq = protowire.AppendFixed64(vq, math.Float64bits(q.value))
		b = appendMessage(b, fQuantiles, vq)
	}
	e.point = b
	return b
}

func appendMessage(b []byte, field protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// appendString leaves out an empty string, as proto3 does.
func appendString(b []byte, field protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendFixed64 leaves out a zero, as proto3 does.
func appendFixed64(b []byte, field protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// appendKeyValue appends a KeyValue with a string AnyValue, sizes computed
// up front so nothing is encoded twice.
func appendKeyValue(b []byte, field protowire.Number, k, v string) []byte {
	anySize := protowire.SizeTag(fStringValue) + protowire.SizeBytes(len(v))
	kvSize := protowire.SizeTag(fKey) + protowire.SizeBytes(len(k)) + protowire.SizeTag(fValue) + protowire.SizeBytes(anySize)
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(kvSize))
	b = protowire.AppendTag(b, fKey, protowire.BytesType)
	b = protowire.AppendString(b, k)
	b = protowire.AppendTag(b, fValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(anySize))
	b = protowire.AppendTag(b, fStringValue, protowire.BytesType) // a oneof: sent even when ""
	return protowire.AppendString(b, v)
}
