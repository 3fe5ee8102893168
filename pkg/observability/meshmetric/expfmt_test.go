package meshmetric

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zoneproxy/zoneproxy/test/bench"
)

// The codec is checked against prometheus/common/expfmt, the parser
// kuma-dp and Prometheus's Go clients use: on what Envoy writes both read
// the same samples, and expfmt reads the hijacker's answer as ParseText
// does. expfmt is not used on the scrape path, being too slow for it
// (the package doc; BenchmarkExpfmt).

// envoyEdges is what Envoy 1.21 and later write (source/server/admin/
// prometheus_stats.cc) at its edges: label values escaped by its
// sanitizeValue (\ " and newline, as expfmt), {} for no tags, text
// readouts as gauges with a text_value label, histogram bounds and sums
// in {:.32g}, the +Inf bucket, and the summary form
// (histogram_buckets=summary), whose empty quantiles are "nan".
const envoyEdges = `# TYPE envoy_cluster_upstream_rq counter
envoy_cluster_upstream_rq{envoy_response_code="200",envoy_cluster_name="demo-app_kuma-demo_svc_5000"} 3
envoy_cluster_upstream_rq{envoy_response_code="503",envoy_cluster_name="demo-app_kuma-demo_svc_5000"} 18446744073709551615

# TYPE envoy_listener_downstream_cx_total counter
envoy_listener_downstream_cx_total{envoy_listener_address="0.0.0.0_10001"} 7
envoy_listener_downstream_cx_total{envoy_listener_address="[__]_10001"} 0

# TYPE envoy_server_live gauge
envoy_server_live{} 1

# TYPE envoy_control_plane_identifier gauge
envoy_control_plane_identifier{text_value="kuma-cp \"zone-1\" C:\\kuma\\n\nsecond line"} 0

# TYPE envoy_server_version gauge
envoy_server_version{text_value=""} 0

# TYPE mycompany_custom_namespace_total counter
mycompany_custom_namespace_total{} 42

# TYPE envoy_cluster_upstream_rq_time histogram
envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="a",le="0.10000000000000000555111512312578"} 0
envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="a",le="3600000"} 4
envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="a",le="+Inf"} 5
envoy_cluster_upstream_rq_time_sum{envoy_cluster_name="a"} 21.550000000000000710542735760100
envoy_cluster_upstream_rq_time_count{envoy_cluster_name="a"} 5
envoy_server_initialization_time_ms_bucket{le="0.5"} 0
envoy_server_initialization_time_ms_bucket{le="+Inf"} 1
envoy_server_initialization_time_ms_sum{} 35
envoy_server_initialization_time_ms_count{} 1

# TYPE envoy_cluster_upstream_cx_length_ms summary
envoy_cluster_upstream_cx_length_ms{envoy_cluster_name="a",quantile="0.5"} nan
envoy_cluster_upstream_cx_length_ms{envoy_cluster_name="a",quantile="0.99"} 12.5
envoy_cluster_upstream_cx_length_ms_sum{envoy_cluster_name="a"} 0
envoy_cluster_upstream_cx_length_ms_count{envoy_cluster_name="a"} 0

`

func TestEnvoysOutputReadsAsExpfmtReadsIt(t *testing.T) {
	for name, text := range map[string]string{
		"fixture":   readFixture(t, "envoy-stats.prom"),
		"edges":     envoyEdges,
		"bench, 5k": bench.EnvoyStats(5_000),
	} {
		fams, err := ParseText(text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := expfmtSeries(t, text)
		if got := flatSeries(fams); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ParseText and expfmt differ:\n%s", name, diffLines(got, want))
		}
	}
}

func TestExpfmtReadsTheAnswerAsParseTextDoes(t *testing.T) {
	extra := []Label{{"kuma_proxy_role", "zone-egress"}, {"mesh", `pay"me\nts` + "\n"}, {"envoy_cluster_name", "not-over-the-own"}}
	for _, text := range []string{envoyEdges, readFixture(t, "envoy-stats.prom")} {
		fams, err := ParseText(text)
		if err != nil {
			t.Fatal(err)
		}
		answer := string(AppendText(nil, fams, extra))
		back, err := ParseText(answer)
		if err != nil {
			t.Fatal(err)
		}
		want := expfmtSeries(t, answer)
		if got := flatSeries(back); !reflect.DeepEqual(got, want) {
			t.Errorf("expfmt reads the answer differently:\n%s", diffLines(got, want))
		}
		if !slices.Contains(want, `envoy_server_live{envoy_cluster_name="not-over-the-own",kuma_proxy_role="zone-egress",mesh="pay\"me\\nts\n"} 1`) {
			t.Errorf("expfmt does not see the extra labels on envoy_server_live:\n%s", strings.Join(want, "\n"))
		}
	}
}

// Any label value Envoy can escape, in any position Envoy writes one,
// reads the same in ParseText and expfmt, before and after AppendText.
func FuzzEnvoyLabelValuesReadAsExpfmtReadsThem(f *testing.F) {
	for _, v := range []string{"", `"`, `\`, "\n", `\n`, `\"`, `a\`, "{x=\"1\"},y", "ünïcode ✓", "\r\t", "\x00"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !utf8.ValidString(v) { // Envoy's tags and text readouts come from protobuf strings
			t.Skip()
		}
		e := envoyValue(v)
		text := "# TYPE envoy_c counter\nenvoy_c{envoy_cluster_name=\"" + e + "\",x=\"1\"} 1\n\n" +
			"# TYPE envoy_t gauge\nenvoy_t{text_value=\"" + e + "\"} 0\n\n" +
			"# TYPE envoy_h histogram\nenvoy_h_bucket{a=\"" + e + "\",le=\"1\"} 1\nenvoy_h_bucket{a=\"" + e + "\",le=\"+Inf\"} 2\n" +
			"envoy_h_sum{a=\"" + e + "\"} 3.5\nenvoy_h_count{a=\"" + e + "\"} 2\n\n"
		fams, err := ParseText(text)
		if err != nil {
			t.Fatalf("ParseText refuses Envoy's text: %v\n%s", err, text)
		}
		if got, want := flatSeries(fams), expfmtSeries(t, text); !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseText and expfmt differ:\n%s", diffLines(got, want))
		}
		answer := string(AppendText(nil, fams, []Label{{"mesh", v}}))
		back, err := ParseText(answer)
		if err != nil {
			t.Fatalf("ParseText refuses its own answer: %v\n%s", err, answer)
		}
		if got, want := flatSeries(back), expfmtSeries(t, answer); !reflect.DeepEqual(got, want) {
			t.Fatalf("expfmt reads the answer differently:\n%s", diffLines(got, want))
		}
	})
}

// envoyValue escapes a tag value as Envoy's sanitizeValue does.
func envoyValue(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(v)
}

// flatSeries lists ParseText's samples as name{labels} value lines, labels
// sorted and le and quantile in Go's float form, sorted.
func flatSeries(fams []Family) []string {
	var out []string
	for _, f := range fams {
		for _, s := range f.Samples {
			ls := slices.Clone(s.Labels)
			for i, l := range ls {
				if l.Name == model.BucketLabel || l.Name == model.QuantileLabel {
					if v, err := strconv.ParseFloat(l.Value, 64); err == nil {
						ls[i].Value = fmtFloat(v)
					}
				}
			}
			out = append(out, seriesLine(s.Name, ls, s.Value, s.Timestamp))
		}
	}
	slices.Sort(out)
	return out
}

// expfmtSeries parses text with expfmt and lists its samples as
// flatSeries does.
func expfmtSeries(t *testing.T, text string) []string {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	var out []string
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []Label
			for _, l := range m.Label {
				ls = append(ls, Label{l.GetName(), l.GetValue()})
			}
			ts := m.GetTimestampMs()
			add := func(series string, v float64, extra ...Label) {
				out = append(out, seriesLine(series, append(slices.Clone(ls), extra...), v, ts))
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m.GetUntyped().GetValue())
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.Quantile {
					add(name, q.GetValue(), Label{model.QuantileLabel, fmtFloat(q.GetQuantile())})
				}
				add(name+"_sum", s.GetSampleSum())
				add(name+"_count", float64(s.GetSampleCount()))
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.Bucket {
					add(name+"_bucket", float64(b.GetCumulativeCount())+b.GetCumulativeCountFloat(), Label{model.BucketLabel, fmtFloat(b.GetUpperBound())})
				}
				add(name+"_sum", h.GetSampleSum())
				add(name+"_count", float64(h.GetSampleCount())+h.GetSampleCountFloat())
			default:
				t.Fatalf("expfmt: %s has type %v", name, mf.GetType())
			}
		}
	}
	slices.Sort(out)
	return out
}

func seriesLine(name string, ls []Label, v float64, ts int64) string {
	slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Name + "=" + strconv.Quote(l.Value))
	}
	b.WriteString("} " + fmtFloat(v))
	if ts != 0 {
		b.WriteString(" " + strconv.FormatInt(ts, 10))
	}
	return b.String()
}

func fmtFloat(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func diffLines(got, want []string) string {
	var b strings.Builder
	for _, l := range got {
		if !slices.Contains(want, l) {
			b.WriteString("  ParseText only: " + l + "\n")
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			b.WriteString("  expfmt only:    " + l + "\n")
		}
	}
	if b.Len() == 0 {
		return "  (the same lines, counted differently)\n"
	}
	return b.String()
}
