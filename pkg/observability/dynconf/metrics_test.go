package dynconf

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// metricsPage is the poller's metrics as a scrape of the agent shows them.
func metricsPage(t *testing.T, p *Poller) *strings.Builder {
	t.Helper()
	page, err := testutil.CollectAndFormat(p.Metrics(), expfmt.TypeTextPlain,
		"zoneproxy_dynconf_handler_calls_total", "zoneproxy_dynconf_handler_errors_total", "zoneproxy_dynconf_fetch_errors_total")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(page)
	return &b
}

// Every path's three counters from the start, at 0, in path order.
func TestMetricsOfAFreshPoller(t *testing.T) {
	h := func([]byte) error { return nil }
	p, err := New(Options{Socket: "s", Handlers: map[string]Handler{"/meshmetric": h, "/b\xff": h}})
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP zoneproxy_dynconf_fetch_errors_total Polls that failed for a reason other than a missing listener, by path.
# TYPE zoneproxy_dynconf_fetch_errors_total counter
zoneproxy_dynconf_fetch_errors_total{path="/b` + "\ufffd" + `"} 0
zoneproxy_dynconf_fetch_errors_total{path="/meshmetric"} 0
# HELP zoneproxy_dynconf_handler_calls_total Dynamic config changes handed to a handler, by path.
# TYPE zoneproxy_dynconf_handler_calls_total counter
zoneproxy_dynconf_handler_calls_total{path="/b` + "\ufffd" + `"} 0
zoneproxy_dynconf_handler_calls_total{path="/meshmetric"} 0
# HELP zoneproxy_dynconf_handler_errors_total Dynamic config changes a handler rejected, by path.
# TYPE zoneproxy_dynconf_handler_errors_total counter
zoneproxy_dynconf_handler_errors_total{path="/b` + "\ufffd" + `"} 0
zoneproxy_dynconf_handler_errors_total{path="/meshmetric"} 0
`
	if err := testutil.CollectAndCompare(p.Metrics(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// Each counter shows its own count, under its own name.
func TestMetricsCountByPath(t *testing.T) {
	h := func([]byte) error { return nil }
	p, err := New(Options{Socket: "s", Handlers: map[string]Handler{"/meshmetric": h}})
	if err != nil {
		t.Fatal(err)
	}
	ps := p.paths[0]
	p.count(&ps.calls)
	for range 2 {
		p.count(&ps.handlerErrors)
	}
	for range 3 {
		p.count(&ps.fetchErrors)
	}
	want := `# HELP zoneproxy_dynconf_fetch_errors_total Polls that failed for a reason other than a missing listener, by path.
# TYPE zoneproxy_dynconf_fetch_errors_total counter
zoneproxy_dynconf_fetch_errors_total{path="/meshmetric"} 3
# HELP zoneproxy_dynconf_handler_calls_total Dynamic config changes handed to a handler, by path.
# TYPE zoneproxy_dynconf_handler_calls_total counter
zoneproxy_dynconf_handler_calls_total{path="/meshmetric"} 1
# HELP zoneproxy_dynconf_handler_errors_total Dynamic config changes a handler rejected, by path.
# TYPE zoneproxy_dynconf_handler_errors_total counter
zoneproxy_dynconf_handler_errors_total{path="/meshmetric"} 2
`
	if err := testutil.CollectAndCompare(p.Metrics(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
