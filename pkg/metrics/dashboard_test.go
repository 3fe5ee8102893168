package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	zptestutil "github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// dashboardFile is the example Grafana dashboard, kept here importable into
// Grafana 11 and in step with the metrics the agent serves.
const dashboardFile = "../../examples/grafana/zoneproxy.json"

type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Requires []struct {
		Type, ID string
	} `json:"__requires"`
	ID            *int   `json:"id"`
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []panel
	Templating    struct {
		List []struct {
			Name       string
			Datasource datasource
		}
	}
}

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *datasource
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		Expr         string `json:"expr"`
		RefID        string `json:"refId"`
		LegendFormat string `json:"legendFormat"`
		Datasource   *datasource
	}
}

type datasource struct{ Type, UID string }

// grafana11Schema is the schemaVersion Grafana 11.0 to 11.2 write (11.3
// and later write newer ones and migrate this one on import).
const grafana11Schema = 39

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	// Grafana reads its keys as spelt; Go would match them in any case.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatalf("zoneproxy.json: %v", err)
	}
	for _, k := range []string{"__inputs", "__requires", "title", "uid", "schemaVersion", "panels", "templating", "time"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("zoneproxy.json has no %q", k)
		}
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("zoneproxy.json: %v", err)
	}
	return d
}

// What Grafana 11's import needs: a title and uid, its schema version, no
// database id, and one datasource input that every query uses.
func TestDashboardImportsIntoGrafana11(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" || len(d.UID) > 40 {
		t.Errorf("title %q, uid %q: both are needed, the uid at most 40 characters", d.Title, d.UID)
	}
	if d.SchemaVersion != grafana11Schema {
		t.Errorf("schemaVersion %d, want %d", d.SchemaVersion, grafana11Schema)
	}
	if d.ID != nil {
		t.Errorf("id %d: an exported dashboard has id null, or import overwrites another", *d.ID)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].Type != "datasource" || d.Inputs[0].PluginID != "prometheus" {
		t.Fatalf("__inputs %+v, want one Prometheus datasource input DS_PROMETHEUS", d.Inputs)
	}
	usesInput := func(where string, ds *datasource) {
		if ds == nil || ds.Type != "prometheus" || ds.UID != "${DS_PROMETHEUS}" {
			t.Errorf("%s: datasource %+v, want the DS_PROMETHEUS input", where, ds)
		}
	}
	for _, v := range d.Templating.List {
		usesInput("variable "+v.Name, &v.Datasource)
	}

	required := map[string]bool{}
	for _, r := range d.Requires {
		required[r.Type+"/"+r.ID] = true
	}
	if !required["grafana/grafana"] || !required["datasource/prometheus"] {
		t.Errorf("__requires lacks grafana or the prometheus datasource: %+v", d.Requires)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		where := "panel " + p.Title
		if p.Title == "" || p.Type == "" || ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %d %q: each panel needs a title, a type and its own id", p.ID, p.Title)
		}
		ids[p.ID] = true
		if p.GridPos.W < 1 || p.GridPos.H < 1 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v is outside Grafana's 24 columns", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if !required["panel/"+p.Type] {
			t.Errorf("%s: panel type %q is not in __requires", where, p.Type)
		}
		usesInput(where, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			usesInput(where, q.Datasource)
			if q.Expr == "" || q.RefID == "" || refs[q.RefID] {
				t.Errorf("%s: each query needs an expr and its own refId: %+v", where, q)
			}
			refs[q.RefID] = true
			if !balanced(q.Expr) {
				t.Errorf("%s: unbalanced brackets in %s", where, q.Expr)
			}
		}
	}
}

// envoyMetrics are Envoy's own names the dashboard reads; the Envoy
// stand-in's tests pin their shape (test/envoy/ads_more_test.go).
var envoyMetrics = []string{"envoy_listener_downstream_cx_active"}

// dashboardWants is what the dashboard must show: agent state, bootstrap and
// mesh waits, Envoy restarts, zone listeners, xDS errors, access logs and
// connections per zone listener.
var dashboardWants = []string{
	"zoneproxy_phase", "zoneproxy_ready", "zoneproxy_bootstrap_attempts_total", "zoneproxy_mesh_wait_seconds_total",
	"zoneproxy_envoy_exits_total", "zoneproxy_zone_listener_present", "zoneproxy_xds_stream_errors_total",
	"zoneproxy_xds_rejected_total", "zoneproxy_accesslog_lines_forwarded_total", "zoneproxy_accesslog_lines_dropped_total",
	"envoy_listener_downstream_cx_active",
}

var (
	metricName = regexp.MustCompile(`\b(?:zoneproxy|process|go|envoy)_[a-z0-9_]+\b`)
	byLabels   = regexp.MustCompile(`\bby \(([^)]*)\)`)
	legendVar  = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
)

// Every metric and label a query names is one the agent serves: a renamed
// metric breaks the dashboard here, not in front of an operator. A metric is
// on a fresh agent's page (the process and Go metrics come from the client
// library's collectors) or declared in pkg/ by its quoted name; a label is on
// that page's family or in the declaration of a metric the query names.
func TestDashboardMetricsExist(t *testing.T) {
	d := loadDashboard(t)
	src := productSource(t)
	fresh := parse(t, scrape(t, New(state.NewTracker())))
	onPage := func(name, label string) bool {
		f, ok := fresh[name]
		if !ok || label == "" {
			return ok
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					return true
				}
			}
		}
		return false
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			var agents []string
			for _, name := range metricName.FindAllString(q.Expr, -1) {
				if strings.HasPrefix(name, "envoy_listener_address") {
					continue // a label
				}
				used[name] = true
				if slices.Contains(envoyMetrics, name) {
					continue
				}
				agents = append(agents, name)
				if !onPage(name, "") && !declares(src, name, "") {
					t.Errorf("panel %q: %s is not a metric of the agent (not on its page, not declared in pkg/)", p.Title, name)
				}
			}
			var labels []string
			for _, m := range byLabels.FindAllStringSubmatch(q.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					labels = append(labels, strings.TrimSpace(l))
				}
			}
			for _, m := range legendVar.FindAllStringSubmatch(q.LegendFormat, -1) {
				labels = append(labels, m[1])
			}
			for _, l := range labels {
				switch {
				case l == "instance" || l == "job": // Prometheus adds them
				case strings.HasPrefix(l, "envoy_"): // Envoy's tags
				case !slices.ContainsFunc(agents, func(name string) bool { return onPage(name, l) || declares(src, name, l) }):
					t.Errorf("panel %q: label %q is on none of the metrics %v", p.Title, l, agents)
				}
			}
		}
	}
	for _, name := range dashboardWants {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// declares reports whether src declares the metric name by its quoted
// name, with label (if not "") quoted in the declaration: before the next
// metric's name, within 400 bytes.
func declares(src, name, label string) bool {
	for rest := src; ; {
		i := strings.Index(rest, `"`+name+`"`)
		if i < 0 {
			return false
		}
		rest = rest[i+len(name)+2:]
		if label == "" {
			return true
		}
		decl := rest[:min(len(rest), 400)]
		if j := strings.Index(decl, `"zoneproxy_`); j >= 0 {
			decl = decl[:j]
		}
		if strings.Contains(decl, `"`+label+`"`) {
			return true
		}
	}
}

// productSource is every non-test Go file under pkg/.
func productSource(t *testing.T) string { return zptestutil.ProductSource(t, "..") }

func balanced(expr string) bool {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inString := false
	for _, r := range expr {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inString
}

// The phase panel colours the states an operator acts on: READY green,
// FAILED red, a maintenance drain blue; the rest stay orange.
func TestDashboardPhaseColours(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title       string
			FieldConfig struct {
				Overrides []struct {
					Matcher    struct{ Options string }
					Properties []struct {
						Value struct{ FixedColor string }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	colour := map[string]string{}
	for _, p := range d.Panels {
		if p.Title != "Agent phase" {
			continue
		}
		for _, phase := range []string{"READY", "FAILED", "DRAINING", "DRAINED", "WAITING_FOR_MESH"} {
			colour[phase] = "orange"
			for _, o := range p.FieldConfig.Overrides {
				if regexp.MustCompile("^"+o.Matcher.Options+"$").MatchString("zp-1: "+phase) && len(o.Properties) > 0 {
					colour[phase] = o.Properties[0].Value.FixedColor
				}
			}
		}
	}
	want := map[string]string{"READY": "green", "FAILED": "red", "DRAINING": "blue", "DRAINED": "blue", "WAITING_FOR_MESH": "orange"}
	for phase, c := range want {
		if colour[phase] != c {
			t.Errorf("%s is %q, want %q", phase, colour[phase], c)
		}
	}
}
