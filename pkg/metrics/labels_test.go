package metrics

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// odd holds what the text format escapes (", \, newline) and what it does
// not (a tab, a no-break space), which Go's %q would escape too.
const odd = "1.0-\"rc\"\\x\nnext\tline\u00a0é"

// Label values reach a scraper as they were, whatever they hold: versions
// come from the build's ldflags, outcomes and names from other components.
func TestLabelValuesSurviveAScrape(t *testing.T) {
	cases := []struct {
		name          string
		record        func(m *Metrics, tr *state.Tracker)
		family, label string
	}{
		{"build version", func(*Metrics, *state.Tracker) { version.Version = odd }, "zoneproxy_build_info", "version"},
		{"build commit", func(*Metrics, *state.Tracker) { version.Commit = odd }, "zoneproxy_build_info", "commit"},
		{"bootstrap outcome", func(m *Metrics, _ *state.Tracker) { m.BootstrapAttempt(odd) }, "zoneproxy_bootstrap_attempts_total", "outcome"},
		{"phase", func(_ *Metrics, tr *state.Tracker) { tr.Set(state.Phase(odd), "") }, "zoneproxy_phase", "phase"},
		{"zone listener", func(m *Metrics, _ *state.Tracker) { m.ZoneListener(odd, true) }, "zoneproxy_zone_listener_present", "listener"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, c := version.Version, version.Commit
			t.Cleanup(func() { version.Version, version.Commit = v, c })
			tr := state.NewTracker()
			m := New(tr)
			tc.record(m, tr)
			page := scrape(t, m)
			if want := `"1.0-\"rc\"\\x\nnext` + "\t" + "line\u00a0é\""; !strings.Contains(page, want) {
				t.Errorf("the page lacks the escaped value %s:\n%s", want, page)
			}
			fams, err := meshmetric.ParseText(page)
			if err != nil {
				t.Fatalf("the page does not parse: %v\n%s", err, page)
			}
			if !hasLabel(fams, tc.family, tc.label, odd) {
				t.Errorf("no %s sample with %s=%q after parsing:\n%s", tc.family, tc.label, odd, page)
			}
		})
	}
}

// Invalid UTF-8, which the client library refuses (it would panic), may
// come from Envoy (its /ready word makes the phase) or the build: it
// becomes U+FFFD, and the page is still served and valid.
func TestInvalidUTF8LabelValues(t *testing.T) {
	const bad, fixed = "v\xff1", "v\ufffd1"
	cases := []struct {
		name          string
		record        func(m *Metrics, tr *state.Tracker)
		family, label string
	}{
		{"build version", func(*Metrics, *state.Tracker) { version.Version = bad }, "zoneproxy_build_info", "version"},
		{"bootstrap outcome", func(m *Metrics, _ *state.Tracker) { m.BootstrapAttempt(bad) }, "zoneproxy_bootstrap_attempts_total", "outcome"},
		{"Envoy's state word", func(_ *Metrics, tr *state.Tracker) {
			tr.Set(state.Ready, "Envoy ready")
			tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: bad, At: time.Now()})
		}, "zoneproxy_phase", "phase"},
		{"zone listener", func(m *Metrics, _ *state.Tracker) { m.ZoneListener(bad, true) }, "zoneproxy_zone_listener_present", "listener"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := version.Version
			t.Cleanup(func() { version.Version = v })
			tr := state.NewTracker()
			m := New(tr)
			tc.record(m, tr)
			page := scrape(t, m)
			fams, err := meshmetric.ParseText(page)
			if err != nil {
				t.Fatalf("the page does not parse: %v\n%s", err, page)
			}
			if !hasLabel(fams, tc.family, tc.label, fixed) && !hasLabel(fams, tc.family, tc.label, "ENVOY_"+fixed) {
				t.Errorf("no %s sample with %s=%q:\n%s", tc.family, tc.label, fixed, page)
			}
		})
	}
}

func hasLabel(fams []*dto.MetricFamily, family, label, value string) bool {
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					return true
				}
			}
		}
	}
	return false
}
