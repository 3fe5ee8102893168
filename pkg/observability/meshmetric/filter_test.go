package meshmetric

import (
	"reflect"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// counter is a counter family of one sample per label set given, each
// as name, value, name, value...
func counter(name string, labelSets ...[]string) *dto.MetricFamily {
	f := &dto.MetricFamily{Name: proto.String(name), Type: dto.MetricType_COUNTER.Enum()}
	if len(labelSets) == 0 {
		labelSets = [][]string{nil}
	}
	for _, ls := range labelSets {
		m := &dto.Metric{Counter: &dto.Counter{Value: proto.Float64(1)}}
		for i := 0; i+1 < len(ls); i += 2 {
			m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(ls[i]), Value: proto.String(ls[i+1])})
		}
		f.Metric = append(f.Metric, m)
	}
	return f
}

func names(fams []*dto.MetricFamily) []string {
	var out []string
	for _, f := range fams {
		out = append(out, f.GetName())
	}
	return out
}

func mustParse(t *testing.T, body string) *Config {
	t.Helper()
	c, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The fixture of kuma-observability.md §7 through the §5 policy plus
// include Prefix my_custom keeps and drops what kuma-dp did (§2.4 obs).
func TestFixtureThroughThePolicyKeepsWhatKumaDPKept(t *testing.T) {
	fams, err := ParseText(readFixture(t, "envoy-stats.prom"))
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, readFixture(t, "policy.json"))
	got := series(t, c.Select(fams))
	want := []string{
		`envoy_cluster_upstream_cx_total{envoy_cluster_name="legacy-0123456789abcdef"} 3`,
		`envoy_cluster_upstream_cx_total{envoy_cluster_name="legacy-fedcba9876543210"} 4`,
		`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="0.5"} 0`,
		`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="1"} 1`,
		`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="5"} 5`,
		`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="10"} 7`,
		`envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="httpbin_80",le="+Inf"} 7`,
		`envoy_cluster_upstream_rq_time_sum{envoy_cluster_name="httpbin_80"} 21.5`,
		`envoy_cluster_upstream_rq_time_count{envoy_cluster_name="httpbin_80"} 7`,
		`envoy_cluster_upstream_rq_total{envoy_cluster_name="httpbin_80"} 7`,
		`envoy_server_live 1`,
		`my_custom_metric 42`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kept\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNoConfigKeepsEverything(t *testing.T) {
	fams, err := ParseText(readFixture(t, "envoy-stats.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var none *Config
	if got := len(series(t, none.Select(fams))); got != 14 {
		t.Errorf("kept %d samples, want all 14", got)
	}
	if none.Labels() != nil || !none.IncludeUnused() {
		t.Errorf("no config: labels %v, includeUnused %v; want none and true", none.Labels(), none.IncludeUnused())
	}
}

// Each family name below is one a profile keeps or not on its own.
func TestProfiles(t *testing.T) {
	families := []string{
		"envoy_cluster_upstream_rq_total",     // contains _rq
		"envoy_listener_downstream_cx_total",  // contains cx_total
		"envoy_cluster_membership_healthy",    // exact
		"envoy_cluster_membership_total",      // exact
		"envoy_control_plane_connected_state", // prefix
		"kuma_dp_dns_requests",                // prefix
		"envoy_cluster_lb_subsets_active",     // Basic drops it
		"envoy_cluster_membership_change",     // Basic drops it
		"envoy_runtime_load_success",          // Basic drops it
	}
	basic := families[:6]
	tests := []struct {
		profiles string
		want     []string
	}{
		{`no sidecar`, basic},
		{``, basic},
		{`[]`, basic},
		{`[{"name":"Basic"}]`, basic},
		{`[{"name":"All"}]`, families},
		{`[{"name":"None"}]`, nil},
		{`[{"name":"None"},{"name":"Basic"}]`, basic},
		{`[{"name":"Basic"},{"name":"All"},{"name":"None"}]`, families},
		{`[{"name":"Fancy"}]`, basic},
		{`[{"name":"Fancy"},{"name":"None"}]`, nil},
	}
	for _, tt := range tests {
		body := `{"observability":{"metrics":{"sidecar":{"profiles":{}}}}}`
		if tt.profiles == "no sidecar" {
			body = `{"observability":{"metrics":{"backends":[]}}}`
		} else if tt.profiles != "" {
			body = `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":` + tt.profiles + `}}}}}`
		}
		var fams []*dto.MetricFamily
		for _, n := range families {
			fams = append(fams, counter(n))
		}
		if got := names(mustParse(t, body).Select(fams)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("profiles %s: kept %q, want %q", tt.profiles, got, tt.want)
		}
	}
}

func TestSelectors(t *testing.T) {
	families := []string{"envoy_server_live", "envoy_server_uptime", "my_envoy_server", "envoy_cluster_x_server"}
	tests := []struct {
		name, sel string
		want      []string
	}{
		{"prefix", `{"type":"Prefix","match":"envoy_server"}`, families[:2]},
		{"exact", `{"type":"Exact","match":"envoy_server_live"}`, families[:1]},
		{"exact is not prefix", `{"type":"Exact","match":"envoy_server"}`, nil},
		{"contains", `{"type":"Contains","match":"server"}`, families},
		{"regex is unanchored", `{"type":"Regex","match":"server_l"}`, families[:1]},
		{"regex anchored", `{"type":"Regex","match":"^envoy_.*server$"}`, families[3:]},
		{"unknown type matches nothing", `{"type":"Glob","match":"*"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"include", "exclude"} {
				body := `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"None"}],"include":[` + tt.sel + `]}}}}}`
				want := tt.want
				if mode == "exclude" {
					body = `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"All"}],"exclude":[` + tt.sel + `]}}}}}`
					want = without(families, tt.want)
				}
				var fams []*dto.MetricFamily
				for _, n := range families {
					fams = append(fams, counter(n))
				}
				if got := names(mustParse(t, body).Select(fams)); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: kept %q, want %q", mode, got, want)
				}
			}
		})
	}
}

func without(all, drop []string) []string {
	var out []string
	for _, n := range all {
		if !contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestIncludeWinsOverExclude(t *testing.T) {
	c := mustParse(t, `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"All"}],
		"exclude":[{"type":"Prefix","match":"a"}],"include":[{"type":"Exact","match":"ab"}]}}}}}`)
	fams := []*dto.MetricFamily{counter("aa"), counter("ab"), counter("b")}
	if got, want := names(c.Select(fams)), []string{"ab", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kept %q, want %q", got, want)
	}
}

func TestBasicDropsInternalSamples(t *testing.T) {
	values := map[string]bool{ // entity label value → kept
		"httpbin_80": true, "system_envoy_admin": false, "_kuma_readiness": false, "ads_cluster": false,
		"access_log_sink": false, "kuma_envoy_admin": false, "kuma_metrics_hijacker": false,
		"my_ads_cluster": true, "kuma_envoy_admin_2": true, "sys_x": true,
		"tracing:zipkin": false, "tracing": false, "my_tracing": true, // MeshTrace backends' clusters
	}
	for _, label := range []string{"envoy_cluster_name", "envoy_http_conn_manager_prefix", "envoy_listener_address", "other_label"} {
		for value, kept := range values {
			for _, profile := range []string{"Basic", "All"} {
				c := mustParse(t, `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"`+profile+`"}]}}}}}`)
				want := kept || label == "other_label" || profile == "All"
				fams := []*dto.MetricFamily{counter("envoy_x_rq_total", []string{"a", "b", label, value})}
				if got := len(c.Select(fams)) == 1; got != want {
					t.Errorf("%s, %s=%q: kept %v, want %v", profile, label, value, got, want)
				}
			}
		}
	}
}

func TestBasicDropsAnIncludedFamilyLeftEmpty(t *testing.T) {
	c := mustParse(t, `{"observability":{"metrics":{"sidecar":{"profiles":{"include":[{"type":"Exact","match":"custom"}]}}}}}`)
	fams := []*dto.MetricFamily{counter("custom", []string{"envoy_cluster_name", "system_x"}), counter("custom_other")}
	if got := c.Select(fams); len(got) != 0 {
		t.Errorf("kept %+v, want nothing", got)
	}
}

// Only Basic drops internal samples: what None includes or All keeps
// stays whole.
func TestOnlyBasicDropsInternalSamples(t *testing.T) {
	for _, profile := range []string{"None", "All"} {
		c := mustParse(t, `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"`+profile+`"}],
			"include":[{"type":"Exact","match":"envoy_cluster_upstream_rq_total"}]}}}}}`)
		fams := []*dto.MetricFamily{counter("envoy_cluster_upstream_rq_total", []string{"envoy_cluster_name", "system_envoy_admin"})}
		if got := c.Select(fams); len(got) != 1 || len(got[0].Metric) != 1 {
			t.Errorf("%s: kept %+v, want the system_ sample", profile, got)
		}
	}
}
