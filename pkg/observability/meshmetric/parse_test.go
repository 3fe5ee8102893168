package meshmetric

import (
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTextGroupsEnvoysFamilies(t *testing.T) {
	fams, err := ParseText(readFixture(t, "envoy-stats.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.Name+":"+f.Type.String()+":"+strconv.Itoa(len(f.Samples)))
	}
	want := []string{
		"envoy_cluster_upstream_cx_total:counter:2",
		"envoy_cluster_upstream_rq_total:counter:2",
		"envoy_server_live:gauge:1",
		"envoy_server_memory_allocated:gauge:1",
		"my_custom_metric:gauge:1",
		"envoy_cluster_upstream_rq_time:histogram:7",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("families\n got %q\nwant %q", got, want)
	}
	h := fams[5].Samples
	if h[4].Name != "envoy_cluster_upstream_rq_time_bucket" || h[5].Name != "envoy_cluster_upstream_rq_time_sum" || h[5].Value != 21.5 {
		t.Errorf("histogram samples %+v", h)
	}
	if le, _ := h[4].Label("le"); le != "+Inf" {
		t.Errorf("last bucket le = %q", le)
	}
	if len(fams[2].Samples[0].Labels) != 0 {
		t.Errorf("{} gave labels %v", fams[2].Samples[0].Labels)
	}
}

func TestParseTextSamples(t *testing.T) {
	tests := []struct {
		name, in string
		want     Sample
	}{
		{"no labels", "a 1", Sample{Name: "a", Value: 1}},
		{"empty braces", "a{} 2", Sample{Name: "a", Value: 2}},
		{"labels and spaces", `a{ x = "1" , y="2", } 3`, Sample{Name: "a", Labels: []Label{{"x", "1"}, {"y", "2"}}, Value: 3}},
		{"escapes", `a{v="q\"b\\n\nz"} 1`, Sample{Name: "a", Labels: []Label{{"v", "q\"b\\n\nz"}}, Value: 1}},
		{"unknown escape kept", `a{v="C:\dir"} 1`, Sample{Name: "a", Labels: []Label{{"v", `C:\dir`}}, Value: 1}},
		{"brace and comma in value", `a{v="{a,b}"} 1`, Sample{Name: "a", Labels: []Label{{"v", "{a,b}"}}, Value: 1}},
		{"text readout", `envoy_control_plane_identifier{text_value="zone-cp-1"} 1`, Sample{Name: "envoy_control_plane_identifier", Labels: []Label{{"text_value", "zone-cp-1"}}, Value: 1}},
		{"float", "a 1.5e+03", Sample{Name: "a", Value: 1500}},
		{"negative", "a -2", Sample{Name: "a", Value: -2}},
		{"timestamp", "a 1 1700000000000", Sample{Name: "a", Value: 1, Timestamp: 1700000000000}},
		{"tab before timestamp", "a 1\t\t1700000000000", Sample{Name: "a", Value: 1, Timestamp: 1700000000000}},
		{"colon in name", "a:b 1", Sample{Name: "a:b", Value: 1}},
		{"tabs and CR", "a\t7\r", Sample{Name: "a", Value: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fams, err := ParseText(tt.in + "\n")
			if err != nil {
				t.Fatal(err)
			}
			if len(fams) != 1 || fams[0].Type != Untyped || len(fams[0].Samples) != 1 {
				t.Fatalf("got %+v", fams)
			}
			got := fams[0].Samples[0]
			if len(got.Labels) == 0 {
				got.Labels = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseTextSpecialValues(t *testing.T) {
	fams, err := ParseText("a +Inf\nb -Inf\nc NaN\n")
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(fams[0].Samples[0].Value, 1) || !math.IsInf(fams[1].Samples[0].Value, -1) || !math.IsNaN(fams[2].Samples[0].Value) {
		t.Errorf("got %+v", fams)
	}
}

func TestParseTextHelpAndSummary(t *testing.T) {
	in := "# HELP s Latency\\nin ms, a \\\\ b.\n# TYPE s summary\n" +
		"s{quantile=\"0.5\"} 3\ns{quantile=\"0.99\"} 9\ns_sum 40\ns_count 10\n" +
		"# some comment\n# TYPE s_count_other gauge\ns_count_other 1\n"
	fams, err := ParseText(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 2 || fams[0].Help != "Latency\nin ms, a \\ b." || fams[0].Type != Summary || len(fams[0].Samples) != 4 {
		t.Fatalf("got %+v", fams)
	}
	if fams[1].Name != "s_count_other" || len(fams[1].Samples) != 1 {
		t.Errorf("second family %+v", fams[1])
	}
}

func TestParseTextGathersASplitFamily(t *testing.T) {
	fams, err := ParseText("a{x=\"1\"} 1\nb 2\na{x=\"2\"} 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 2 || fams[0].Name != "a" || len(fams[0].Samples) != 2 || fams[0].Samples[1].Value != 3 || fams[1].Samples[0].Value != 2 {
		t.Fatalf("got %+v", fams)
	}
}

func TestParseTextRejectsMalformedLines(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"no value", "a\n", "line 1: a: want a space and a value"},
		{"bad value", "# TYPE a gauge\na{} one\n", `line 2: a: invalid value "one"`},
		{"unclosed labels", `a{x="1" 1`, "line 1: a: label x: want , or }"},
		{"unclosed value", `a{x="1} 1`, "value not closed"},
		{"no quotes", "a{x=1} 1", `want a value in "quotes"`},
		{"bad name", "1a 1", "invalid metric name"},
		{"bad label name", `a{1x="1"} 1`, "invalid label name"},
		{"bad timestamp", "a 1 soon", `invalid timestamp "soon"`},
		{"type after samples", "a 1\nb 1\n# TYPE a counter\n", "line 3: # TYPE a after its samples"},
		{"type with two words", "# TYPE a counter gauge\n", "want one type"},
	}
	for _, tt := range tests {
		_, err := ParseText(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func FuzzParseText(f *testing.F) {
	f.Add(readFixture(f, "envoy-stats.prom"))
	f.Add("# HELP a x\\ny\n# TYPE a summary\na{quantile=\"0.5\"} 1\na_sum 2\na_count 3\n")
	f.Add(`a{v="q\"\\\n\d"} NaN 1`)
	f.Fuzz(func(t *testing.T, in string) {
		fams, err := ParseText(in)
		if err != nil {
			return
		}
		// What parses must write as text that parses to the same samples.
		again, err := ParseText(string(AppendText(nil, fams, nil)))
		if err != nil {
			t.Fatalf("rewritten text does not parse: %v", err)
		}
		if count(again) != count(fams) {
			t.Fatalf("%d samples became %d", count(fams), count(again))
		}
	})
}

func count(fams []Family) int {
	n := 0
	for _, f := range fams {
		n += len(f.Samples)
	}
	return n
}
