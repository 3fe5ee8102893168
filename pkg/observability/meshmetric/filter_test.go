package meshmetric

import (
	"reflect"
	"strings"
	"testing"
)

// series lists every sample as name{labels} in order, for comparisons.
func series(fams []Family) []string {
	var out []string
	for _, f := range fams {
		for _, s := range f.Samples {
			var ls []string
			for _, l := range s.Labels {
				ls = append(ls, l.Name+"="+l.Value)
			}
			out = append(out, s.Name+"{"+strings.Join(ls, ",")+"}")
		}
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
	got := series(c.Select(fams))
	want := []string{
		"envoy_cluster_upstream_cx_total{envoy_cluster_name=legacy-0123456789abcdef}",
		"envoy_cluster_upstream_cx_total{envoy_cluster_name=legacy-fedcba9876543210}",
		"envoy_cluster_upstream_rq_total{envoy_cluster_name=httpbin_80}",
		"envoy_server_live{}",
		"my_custom_metric{}",
		"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=httpbin_80,le=0.5}",
		"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=httpbin_80,le=1}",
		"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=httpbin_80,le=5}",
		"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=httpbin_80,le=10}",
		"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=httpbin_80,le=+Inf}",
		"envoy_cluster_upstream_rq_time_sum{envoy_cluster_name=httpbin_80}",
		"envoy_cluster_upstream_rq_time_count{envoy_cluster_name=httpbin_80}",
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
	if got := count(none.Select(fams)); got != 14 {
		t.Errorf("kept %d samples, want all 14", got)
	}
	if none.Labels() != nil || !none.IncludeUnused() {
		t.Errorf("no config: labels %v, includeUnused %v; want none and true", none.Labels(), none.IncludeUnused())
	}
}

// Each family name below is one a profile keeps or not on its own.
func TestProfiles(t *testing.T) {
	names := []string{
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
	basic := names[:6]
	tests := []struct {
		profiles string
		want     []string
	}{
		{`no sidecar`, basic},
		{``, basic},
		{`[]`, basic},
		{`[{"name":"Basic"}]`, basic},
		{`[{"name":"All"}]`, names},
		{`[{"name":"None"}]`, nil},
		{`[{"name":"None"},{"name":"Basic"}]`, basic},
		{`[{"name":"Basic"},{"name":"All"},{"name":"None"}]`, names},
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
		var fams []Family
		for _, n := range names {
			fams = append(fams, Family{Name: n, Type: Counter, Samples: []Sample{{Name: n, Value: 1}}})
		}
		var got []string
		for _, f := range mustParse(t, body).Select(fams) {
			got = append(got, f.Name)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("profiles %s: kept %q, want %q", tt.profiles, got, tt.want)
		}
	}
}

func TestSelectors(t *testing.T) {
	names := []string{"envoy_server_live", "envoy_server_uptime", "my_envoy_server", "envoy_cluster_x_server"}
	tests := []struct {
		name, sel string
		want      []string
	}{
		{"prefix", `{"type":"Prefix","match":"envoy_server"}`, names[:2]},
		{"exact", `{"type":"Exact","match":"envoy_server_live"}`, names[:1]},
		{"exact is not prefix", `{"type":"Exact","match":"envoy_server"}`, nil},
		{"contains", `{"type":"Contains","match":"server"}`, names},
		{"regex is unanchored", `{"type":"Regex","match":"server_l"}`, names[:1]},
		{"regex anchored", `{"type":"Regex","match":"^envoy_.*server$"}`, names[3:]},
		{"unknown type matches nothing", `{"type":"Glob","match":"*"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"include", "exclude"} {
				body := `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"None"}],"include":[` + tt.sel + `]}}}}}`
				want := tt.want
				if mode == "exclude" {
					body = `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"All"}],"exclude":[` + tt.sel + `]}}}}}`
					want = without(names, tt.want)
				}
				var fams []Family
				for _, n := range names {
					fams = append(fams, Family{Name: n, Type: Gauge, Samples: []Sample{{Name: n}}})
				}
				var got []string
				for _, f := range mustParse(t, body).Select(fams) {
					got = append(got, f.Name)
				}
				if !reflect.DeepEqual(got, want) {
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
	fams := []Family{{Name: "aa", Samples: []Sample{{Name: "aa"}}}, {Name: "ab", Samples: []Sample{{Name: "ab"}}}, {Name: "b", Samples: []Sample{{Name: "b"}}}}
	var got []string
	for _, f := range c.Select(fams) {
		got = append(got, f.Name)
	}
	if want := []string{"ab", "b"}; !reflect.DeepEqual(got, want) {
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
			fam := Family{Name: "envoy_x_rq_total", Type: Counter, Samples: []Sample{
				{Name: "envoy_x_rq_total", Labels: []Label{{"a", "b"}, {label, value}}},
			}}
			for _, profile := range []string{"Basic", "All"} {
				c := mustParse(t, `{"observability":{"metrics":{"sidecar":{"profiles":{"appendProfiles":[{"name":"`+profile+`"}]}}}}}`)
				want := kept || label == "other_label" || profile == "All"
				if got := len(c.Select([]Family{fam})) == 1; got != want {
					t.Errorf("%s, %s=%q: kept %v, want %v", profile, label, value, got, want)
				}
			}
		}
	}
}

func TestBasicDropsAnIncludedFamilyLeftEmpty(t *testing.T) {
	c := mustParse(t, `{"observability":{"metrics":{"sidecar":{"profiles":{"include":[{"type":"Exact","match":"custom"}]}}}}}`)
	fams := []Family{
		{Name: "custom", Samples: []Sample{{Name: "custom", Labels: []Label{{"envoy_cluster_name", "system_x"}}}}},
		{Name: "custom_other", Samples: []Sample{{Name: "custom_other"}}},
	}
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
		fams := []Family{{Name: "envoy_cluster_upstream_rq_total", Type: Counter, Samples: []Sample{
			{Name: "envoy_cluster_upstream_rq_total", Labels: []Label{{"envoy_cluster_name", "system_envoy_admin"}}, Value: 1},
		}}}
		if got := c.Select(fams); len(got) != 1 || len(got[0].Samples) != 1 {
			t.Errorf("%s: kept %+v, want the system_ sample", profile, got)
		}
	}
}
