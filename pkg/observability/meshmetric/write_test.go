package meshmetric

import (
	"math"
	"reflect"
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
	fams := []Family{{Name: "x", Type: Gauge, Samples: samples}}
	out := AppendText(nil, fams, []Label{{"extra", `e"x\t` + "\n"}})
	back, err := ParseText(string(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i, s := range back[0].Samples {
		if v, _ := s.Label("v"); v != values[i] {
			t.Errorf("%q came back as %q", values[i], v)
		}
		if e, _ := s.Label("extra"); e != `e"x\t`+"\n" {
			t.Errorf("extra label came back as %q", e)
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
