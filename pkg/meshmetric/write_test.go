package meshmetric

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestAppendTextAddsExtraLabelsWithoutOverwriting(t *testing.T) {
	fams := []Family{
		{Name: "a_total", Type: Counter, Help: "Requests\nseen, \\ \"all\".", Samples: []Sample{
			{Name: "a_total", Labels: []Label{{"zone", "envoy-own"}}, Value: 3},
			{Name: "a_total", Value: 1.5},
		}},
		{Name: "b", Samples: []Sample{{Name: "b", Value: math.Inf(1), Timestamp: 1700000000123}}},
	}
	got := string(AppendText(nil, fams, []Label{{"mesh", "payments"}, {"zone", "default"}}))
	want := "# HELP a_total Requests\\nseen, \\\\ \"all\".\n# TYPE a_total counter\n" +
		"a_total{zone=\"envoy-own\",mesh=\"payments\"} 3\n" +
		"a_total{mesh=\"payments\",zone=\"default\"} 1.5\n" +
		"# TYPE b untyped\n" +
		"b{mesh=\"payments\",zone=\"default\"} +Inf 1700000000123\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestValuesKeepTheirForm(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {5242880, "5242880"}, {-3, "-3"}, {21.5, "21.5"}, {0.001, "0.001"},
		{1e20, "1e+20"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	}
	for _, tt := range tests {
		if got := string(appendValue(nil, tt.v)); got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.v, got, tt.want)
		}
	}
}

func TestLabelValuesRoundTrip(t *testing.T) {
	values := []string{`plain`, `quote " inside`, `back\slash`, "new\nline", `\"`, `trailing\`, `{a="b"},c`, "ünïcode ✓", ``}
	var samples []Sample
	for _, v := range values {
		samples = append(samples, Sample{Name: "x", Labels: []Label{{"v", v}}, Value: 1})
	}
	for _, format := range []string{"text", "openmetrics"} {
		fams := []Family{{Name: "x", Type: Gauge, Samples: samples}}
		var out []byte
		if format == "text" {
			out = AppendText(nil, fams, []Label{{"extra", `e"x\t` + "\n"}})
		} else {
			out = AppendOpenMetrics(nil, fams, []Label{{"extra", `e"x\t` + "\n"}})
		}
		back, err := ParseText(string(out))
		if err != nil {
			t.Fatalf("%s: %v\n%s", format, err, out)
		}
		for i, s := range back[0].Samples {
			if v, _ := s.Label("v"); v != values[i] {
				t.Errorf("%s: %q came back as %q", format, values[i], v)
			}
			if e, _ := s.Label("extra"); e != `e"x\t`+"\n" {
				t.Errorf("%s: extra label came back as %q", format, e)
			}
		}
	}
}

func TestOpenMetrics(t *testing.T) {
	in := "# TYPE envoy_cluster_upstream_rq counter\n" +
		"envoy_cluster_upstream_rq{envoy_response_code=\"200\"} 5\n" +
		"# TYPE envoy_cluster_upstream_rq_total counter\n" +
		"envoy_cluster_upstream_rq_total{} 6\n" +
		"# TYPE envoy_cluster_upstream_cx_destroy counter\n" +
		"envoy_cluster_upstream_cx_destroy{} 1\n" +
		"# TYPE clash_total counter\nclash_total 2\n" +
		"# TYPE clash gauge\nclash 3\n" +
		"# HELP h Latency \"ms\".\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n" +
		"loose 7 1700000000123\n"
	fams, err := ParseText(in)
	if err != nil {
		t.Fatal(err)
	}
	got := string(AppendOpenMetrics(nil, fams, []Label{{"mesh", "m"}}))
	want := "# TYPE envoy_cluster_upstream_rq counter\n" +
		"envoy_cluster_upstream_rq_total{envoy_response_code=\"200\",mesh=\"m\"} 5\n" +
		"envoy_cluster_upstream_rq_total{mesh=\"m\"} 6\n" +
		"# TYPE envoy_cluster_upstream_cx_destroy counter\n" +
		"envoy_cluster_upstream_cx_destroy_total{mesh=\"m\"} 1\n" +
		"# TYPE clash_total unknown\nclash_total{mesh=\"m\"} 2\n" +
		"# TYPE clash gauge\nclash{mesh=\"m\"} 3\n" +
		"# TYPE h histogram\n# HELP h Latency \\\"ms\\\".\n" +
		"h_bucket{le=\"1\",mesh=\"m\"} 1\nh_bucket{le=\"+Inf\",mesh=\"m\"} 2\nh_sum{mesh=\"m\"} 3.5\nh_count{mesh=\"m\"} 2\n" +
		"# TYPE loose unknown\nloose{mesh=\"m\"} 7 1700000000.123\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Every family name appears in one # TYPE line only.
	seen := map[string]bool{}
	for _, line := range strings.Split(got, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name = strings.Fields(name)[0]
			if seen[name] {
				t.Errorf("family %s declared twice", name)
			}
			seen[name] = true
		}
	}
}

func TestAppendTextRoundTripsTheFixture(t *testing.T) {
	in := readFixture(t, "envoy-stats.prom")
	fams, err := ParseText(in)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseText(string(AppendText(nil, fams, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(series(back), series(fams)) {
		t.Errorf("round trip changed the series:\n%v\n%v", series(back), series(fams))
	}
}
