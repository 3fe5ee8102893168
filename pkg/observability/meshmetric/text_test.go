package meshmetric

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// series lists the sample lines fams are written as, # lines left out.
func series(t testing.TB, fams []*dto.MetricFamily) []string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, fams); err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(b.String()) {
		if !strings.HasPrefix(line, "#") {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
	}
	return out
}

// rewrite parses Envoy's text and writes it again, as a scrape without a
// config does.
func rewrite(t *testing.T, text string) []string {
	t.Helper()
	fams, err := ParseText(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return series(t, fams)
}

// What Envoy 1.21 and later write (source/server/admin/prometheus_stats.cc)
// comes out as these lines: label values escaped by its sanitizeValue
// (\ " and newline, as expfmt), {} for no tags, text readouts as gauges
// with a text_value label, histogram bounds and sums in {:.32g}, the +Inf
// bucket, and the summary form (histogram_buckets=summary), whose empty
// quantiles are "nan". Numbers come out in expfmt's float form, as kuma-dp
// serves them.
func TestEnvoysTextComesOutAsScrapersReadIt(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"escapes in a text readout",
			"# TYPE envoy_control_plane_identifier gauge\nenvoy_control_plane_identifier{text_value=\"kuma-cp \\\"zone-1\\\" C:\\\\kuma\\\\n\\nsecond line\"} 1\n\n",
			[]string{`envoy_control_plane_identifier{text_value="kuma-cp \"zone-1\" C:\\kuma\\n\nsecond line"} 1`}},
		{"UTF-8 label value",
			"# TYPE envoy_cluster_upstream_rq_total counter\nenvoy_cluster_upstream_rq_total{envoy_cluster_name=\"café_☕_80\"} 2\n",
			[]string{`envoy_cluster_upstream_rq_total{envoy_cluster_name="café_☕_80"} 2`}},
		{"empty label value",
			"# TYPE envoy_server_version gauge\nenvoy_server_version{text_value=\"\"} 1\n",
			[]string{`envoy_server_version{text_value=""} 1`}},
		{"no tags", "# TYPE envoy_server_live gauge\nenvoy_server_live{} 1\n", []string{"envoy_server_live 1"}},
		{"listener address",
			"# TYPE envoy_listener_downstream_cx_total counter\nenvoy_listener_downstream_cx_total{envoy_listener_address=\"[__]_10001\"} 0\n",
			[]string{`envoy_listener_downstream_cx_total{envoy_listener_address="[__]_10001"} 0`}},
		{"histogram",
			"# TYPE envoy_cluster_upstream_rq_time histogram\n" +
				"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=\"a\",le=\"0.10000000000000000555111512312578\"} 0\n" +
				"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=\"a\",le=\"3600000\"} 4\n" +
				"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=\"a\",le=\"+Inf\"} 5\n" +
				"envoy_cluster_upstream_rq_time_sum{envoy_cluster_name=\"a\"} 21.550000000000000710542735760100\n" +
				"envoy_cluster_upstream_rq_time_count{envoy_cluster_name=\"a\"} 5\n\n",
			[]string{
				`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="a",le="0.1"} 0`,
				`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="a",le="3.6e+06"} 4`,
				`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="a",le="+Inf"} 5`,
				`envoy_cluster_upstream_rq_time_sum{envoy_cluster_name="a"} 21.55`,
				`envoy_cluster_upstream_rq_time_count{envoy_cluster_name="a"} 5`,
			}},
		{"histogram without tags",
			"# TYPE envoy_server_initialization_time_ms histogram\nenvoy_server_initialization_time_ms_bucket{le=\"0.5\"} 0\n" +
				"envoy_server_initialization_time_ms_bucket{le=\"+Inf\"} 1\nenvoy_server_initialization_time_ms_sum{} 35\nenvoy_server_initialization_time_ms_count{} 1\n",
			[]string{
				`envoy_server_initialization_time_ms_bucket{le="0.5"} 0`,
				`envoy_server_initialization_time_ms_bucket{le="+Inf"} 1`,
				`envoy_server_initialization_time_ms_sum 35`,
				`envoy_server_initialization_time_ms_count 1`,
			}},
		{"summary with nan",
			"# TYPE envoy_cluster_upstream_cx_length_ms summary\n" +
				"envoy_cluster_upstream_cx_length_ms{envoy_cluster_name=\"a\",quantile=\"0.5\"} nan\n" +
				"envoy_cluster_upstream_cx_length_ms{envoy_cluster_name=\"a\",quantile=\"0.99\"} 12.5\n" +
				"envoy_cluster_upstream_cx_length_ms_sum{envoy_cluster_name=\"a\"} 0\nenvoy_cluster_upstream_cx_length_ms_count{envoy_cluster_name=\"a\"} 0\n",
			[]string{
				`envoy_cluster_upstream_cx_length_ms{envoy_cluster_name="a",quantile="0.5"} NaN`,
				`envoy_cluster_upstream_cx_length_ms{envoy_cluster_name="a",quantile="0.99"} 12.5`,
				`envoy_cluster_upstream_cx_length_ms_sum{envoy_cluster_name="a"} 0`,
				`envoy_cluster_upstream_cx_length_ms_count{envoy_cluster_name="a"} 0`,
			}},
		{"no # TYPE is untyped, _sum and _count their own families",
			"my_metric 5\nother_sum 2\nother_count 3\n",
			[]string{"my_metric 5", "other_count 3", "other_sum 2"}},
		{"names: a custom namespace, digits, double underscores, a colon",
			"# TYPE mycompany_custom_namespace_total counter\nmycompany_custom_namespace_total{} 42\n" +
				"# TYPE envoy_listener_0_0_0_0_10001__downstream_cx_total counter\nenvoy_listener_0_0_0_0_10001__downstream_cx_total{} 1\n" +
				"recorded:rule 3\n",
			[]string{"envoy_listener_0_0_0_0_10001__downstream_cx_total 1", "mycompany_custom_namespace_total 42", "recorded:rule 3"}},
		{"a counter beyond float64's integers",
			"# TYPE envoy_cluster_upstream_rq counter\nenvoy_cluster_upstream_rq{envoy_response_code=\"503\"} 18446744073709551615\n",
			[]string{`envoy_cluster_upstream_rq{envoy_response_code="503"} 1.8446744073709552e+19`}},
		{"special values, a timestamp, blanks between fields",
			"a +Inf\nb -Inf\nc NaN\nd{ x = \"1\" , y=\"2\", } 1.5e+03 1700000000000\ne\t7\n",
			[]string{"a +Inf", "b -Inf", "c NaN", `d{x="1",y="2"} 1500 1700000000000`, "e 7"}},
		{"a family's samples split by another are gathered",
			"a{x=\"1\"} 1\nb 2\na{x=\"2\"} 3\n",
			[]string{`a{x="1"} 1`, `a{x="2"} 3`, "b 2"}},
		{"# HELP and other comments", "# HELP a Latency\\nin ms, a \\\\ b.\n# just a comment\n# TYPE a gauge\na 1\n", []string{"a 1"}},
		{"empty page", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rewrite(t, tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// What Envoy never writes is refused with the line it is on, so a scrape
// answers 503 with a reason rather than a partial page. The page without
// a final newline is one cut short.
func TestTextEnvoyNeverWritesIsRefused(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"cut short", "# TYPE a counter\na{x=\"1\"} 1\na{x=\"2\"} 3", "line 3: unexpected end of input"},
		{"trailing blank", "a 1 \n", "line 1: expected integer as timestamp"},
		{"CRLF", "a 1\r\n", "line 1: expected float as value"},
		{"unescaped backslash (Envoy before 1.21)", `a{v="C:\dir"} 1` + "\n", `line 1: invalid escape sequence '\d'`},
		{"a second # TYPE", "# TYPE a counter\na 1\n# TYPE a counter\na{x=\"1\"} 2\n", "line 3: second TYPE line"},
		{"# TYPE after the samples", "a 1\nb 1\n# TYPE a counter\n", "line 3: second TYPE line"},
		{"no value", "a\n", "line 1:"},
		{"bad value", "# TYPE a gauge\na{} one\n", `line 2: expected float as value, got "one"`},
		{"unclosed value", "a{x=\"1} 1\n", "line 1: label value \"1} 1\" contains unescaped new-line"},
		{"no quotes", "a{x=1} 1\n", "line 1:"},
		{"duplicate label", "a{x=\"1\",x=\"2\"} 1\n", "line 1: duplicate label names"},
		{"bad timestamp", "a 1 soon\n", `line 1: expected integer as timestamp, got "soon"`},
		{"a quoted UTF-8 name", "{\"envoy.x\",a=\"1\"} 1\n", "line 1:"},
		{"a dot in a name", "envoy.x 1\n", "line 1:"},
	}
	for _, tt := range tests {
		_, err := ParseText(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func TestAddLabelsWithoutOverwriting(t *testing.T) {
	fams, err := ParseText("# TYPE a_total counter\na_total{zone=\"envoy-own\"} 3\na_total 1.5\n" +
		"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n" +
		"# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 1\ns_count 1\n")
	if err != nil {
		t.Fatal(err)
	}
	AddLabels(fams, promLabels(map[string]string{"mesh": "payments", "zone": "default", "le": "x", "quantile": "y"}))
	want := []string{
		`a_total{zone="envoy-own",le="x",mesh="payments",quantile="y"} 3`,
		`a_total{le="x",mesh="payments",quantile="y",zone="default"} 1.5`,
		`h_bucket{mesh="payments",quantile="y",zone="default",le="1"} 1`,
		`h_bucket{mesh="payments",quantile="y",zone="default",le="+Inf"} 2`,
		`h_sum{mesh="payments",quantile="y",zone="default"} 3`,
		`h_count{mesh="payments",quantile="y",zone="default"} 2`,
		`s{le="x",mesh="payments",zone="default",quantile="0.5"} 1`,
		`s_sum{le="x",mesh="payments",zone="default"} 1`,
		`s_count{le="x",mesh="payments",zone="default"} 1`,
	}
	if got := series(t, fams); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Any label value Envoy can write, in any position it writes one, reaches
// the scraper as it was, next to an extra label holding the same value.
func FuzzEnvoyLabelValuesReachTheScraper(f *testing.F) {
	for _, v := range []string{"", `"`, `\`, "\n", `\n`, `\"`, `a\`, "{x=\"1\"},y", "ünïcode ✓", "\r\t", "\x00"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !utf8.ValidString(v) { // Envoy's tags and text readouts come from protobuf strings
			t.Skip()
		}
		e := strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(v) // Envoy's sanitizeValue
		text := "# TYPE envoy_c counter\nenvoy_c{envoy_cluster_name=\"" + e + "\",x=\"1\"} 1\n\n" +
			"# TYPE envoy_t gauge\nenvoy_t{text_value=\"" + e + "\"} 1\n\n" +
			"# TYPE envoy_h histogram\nenvoy_h_bucket{a=\"" + e + "\",le=\"1\"} 1\nenvoy_h_bucket{a=\"" + e + "\",le=\"+Inf\"} 2\n" +
			"envoy_h_sum{a=\"" + e + "\"} 3.5\nenvoy_h_count{a=\"" + e + "\"} 2\n\n"
		fams, err := ParseText(text)
		if err != nil {
			t.Fatalf("Envoy's text refused: %v\n%s", err, text)
		}
		AddLabels(fams, promLabels(map[string]string{"mesh": v}))
		var answer bytes.Buffer
		if err := WriteText(&answer, fams); err != nil {
			t.Fatal(err)
		}
		back, err := ParseText(answer.String())
		if err != nil {
			t.Fatalf("the answer does not parse: %v\n%s", err, answer.String())
		}
		seen := 0
		for _, f := range back {
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if l.GetName() != "x" && l.GetValue() != v {
						t.Errorf("%s: label %s is %q, want %q", f.GetName(), l.GetName(), l.GetValue(), v)
					}
					seen++
				}
			}
		}
		if seen != 7 { // c: 3 labels, t: 2, h: 2
			t.Errorf("%d labels came back, want 7:\n%s", seen, answer.String())
		}
	})
}

func FuzzParseText(f *testing.F) {
	f.Add(readFixture(f, "envoy-stats.prom"))
	f.Add("# HELP a x\\ny\n# TYPE a summary\na{quantile=\"0.5\"} 1\na_sum 2\na_count 3\n")
	f.Add("a{v=\"q\\\"\\\\\\n\"} NaN 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		fams, err := ParseText(in)
		if err != nil {
			return
		}
		// What parses must be written as text that parses to as many series.
		first := series(t, fams)
		var b bytes.Buffer
		if err := WriteText(&b, fams); err != nil {
			t.Fatal(err)
		}
		again, err := ParseText(b.String())
		if err != nil {
			t.Fatalf("rewritten text does not parse: %v\n%s", err, b.String())
		}
		if got := series(t, again); len(got) != len(first) {
			t.Fatalf("%d series became %d", len(first), len(got))
		}
	})
}
