package otlpmetrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// exportsPage is the pusher's metrics as a scrape of the agent shows them.
func exportsPage(t *testing.T, p *Pusher) *strings.Builder {
	t.Helper()
	page, err := testutil.CollectAndFormat(p.Metrics(), expfmt.TypeTextPlain, "zoneproxy_otlp_exports_total")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(page)
	return &b
}

// Each backend's exports by outcome, both outcomes from its first export;
// none before any.
func TestExportsAreCountedByBackendAndOutcome(t *testing.T) {
	p, err := New(Options{Stats: func(context.Context, string) (string, error) { return "", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(p.Metrics()); n != 0 {
		t.Errorf("%d series before any export, want none", n)
	}
	p.counted("otel", true)
	p.counted("otel", true)
	p.counted("otel", false)
	p.counted("late", false)
	p.counted("odd\xffname", true) // a name with invalid UTF-8 must not stop the page
	want := `# HELP zoneproxy_otlp_exports_total OTLP metric exports by OpenTelemetry backend and outcome.
# TYPE zoneproxy_otlp_exports_total counter
zoneproxy_otlp_exports_total{backend="late",outcome="failure"} 1
zoneproxy_otlp_exports_total{backend="late",outcome="success"} 0
zoneproxy_otlp_exports_total{backend="odd` + "\ufffd" + `name",outcome="failure"} 0
zoneproxy_otlp_exports_total{backend="odd` + "\ufffd" + `name",outcome="success"} 1
zoneproxy_otlp_exports_total{backend="otel",outcome="failure"} 1
zoneproxy_otlp_exports_total{backend="otel",outcome="success"} 2
`
	if err := testutil.CollectAndCompare(p.Metrics(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
