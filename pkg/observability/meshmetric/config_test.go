package meshmetric

import (
	"reflect"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestParseReadsWhatKumaSends(t *testing.T) {
	c := mustParse(t, `{"observability":{"metrics":{"applications":[{"name":"app","path":"/metrics","port":8080}],
		"backends":[{"type":"Prometheus","name":null},
		  {"type":"OpenTelemetry","name":"otel-collector","openTelemetry":{"endpoint":"/wd/kuma-otel-otel-collector.sock","refreshInterval":"10s"}}],
		"sidecar":{"profiles":{"appendProfiles":[{"name":"Basic"}]},"includeUnused":true},
		"extraLabels":{"kuma.proxy_role":"zone-egress","mesh":"payments","zone":"default"},
		"someFutureField":{"x":1}},"futureSection":[]}}`)
	if len(c.Backends) != 2 || c.Backends[0].Name != nil || c.Backends[0].Type != "Prometheus" {
		t.Errorf("backends %+v", c.Backends)
	}
	otel := c.Backends[1].OpenTelemetry
	if otel == nil || otel.Endpoint != "/wd/kuma-otel-otel-collector.sock" || time.Duration(otel.RefreshInterval) != 10*time.Second {
		t.Errorf("otel backend %+v", otel)
	}
	if !c.IncludeUnused() {
		t.Error("includeUnused: true was lost")
	}
	want := []string{"kuma_proxy_role=zone-egress", "mesh=payments", "zone=default"}
	if !reflect.DeepEqual(flatLabels(c.Labels()), want) {
		t.Errorf("labels %v, want %v", c.Labels(), want)
	}
}

func TestParseWithoutSidecar(t *testing.T) {
	c := mustParse(t, `{"observability":{"metrics":{"backends":[{"type":"Prometheus","name":null}],"extraLabels":{}}}}`)
	if c.IncludeUnused() || c.Sidecar != nil || len(c.Labels()) != 0 {
		t.Errorf("got %+v, includeUnused %v", c, c.IncludeUnused())
	}
}

func TestParseErrorsNameTheProblem(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"empty", "  ", "empty body"},
		{"truncated", `{"observability":{"metrics":`, "malformed JSON"},
		{"not json", `observability=1`, "malformed JSON at byte 1"},
		{"wrong type", `{"observability":{"metrics":{"extraLabels":{"zone":1}}}}`, "observability.metrics.extraLabels: got JSON number, want string"},
		{"bad duration", `{"observability":{"metrics":{"backends":[{"type":"OpenTelemetry","openTelemetry":{"refreshInterval":"10 sec"}}]}}}`, `refreshInterval: "10 sec" is not a duration`},
		{"bad regex", `{"observability":{"metrics":{"sidecar":{"profiles":{"include":[{"type":"Exact","match":"("},{"type":"Regex","match":"("}]}}}}}`,
			"observability.metrics.sidecar.profiles.include[1].match: invalid regular expression"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.body))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "meshmetric config: ") {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func TestExtraLabelNames(t *testing.T) {
	c := &Config{ExtraLabels: map[string]string{
		"kuma.proxy_role": "a", "k8s.io/app-name": "b", "9lives": "c", "ok_name": "d",
		"x.y": "first", "x_y": "second", "": "dropped",
	}}
	want := []string{"_9lives=c", "k8s_io_app_name=b", "kuma_proxy_role=a", "ok_name=d", "x_y=first"}
	if got := flatLabels(c.Labels()); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func flatLabels(ls []*dto.LabelPair) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.GetName()+"="+l.GetValue())
	}
	return out
}
