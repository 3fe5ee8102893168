// Package meshmetric serves MeshMetric's Prometheus side on a zone proxy:
// the "metrics hijacker" socket Envoy forwards scrapes to. Each scrape
// reads Envoy's admin stats, applies the profile and labels the control
// plane sent over dynconf (/meshmetric), and answers Prometheus text
// 0.0.4 whatever the scraper asks for, as kuma-dp. The parsed families,
// the dynconf Config and its filter are exported for the OTLP push, which
// sends the same data.
//
// Decisions, against kuma-dp's hijacker:
//   - Before the first config (SetConfig never called, or nil) Envoy's
//     stats pass unfiltered and unlabelled, unused ones included, as
//     kuma-dp does before its first dynconf fetch.
//   - includeUnused is honoured: usedonly is asked for only without it
//     (kuma-dp always asks for it, so its includeUnused does nothing).
//   - extraLabels go on every Envoy sample, with names made valid
//     (kuma.proxy_role → kuma_proxy_role); a sample's own label of the
//     same name wins, so distinct series never merge. The agent's own
//     metrics get neither the profile nor the labels.
//   - No otel_scope_*, target_info or Go runtime metrics.
//
// Envoy's text is read and the answer written with prometheus/common's
// expfmt into client_model's MetricFamily, as kuma-dp does, so values,
// le and quantile bounds are written in expfmt's float form (3.6e+06
// where Envoy wrote 3600000), as kuma-dp serves them.
package meshmetric

import (
	"cmp"
	"io"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// textFormat is the hijacker's one format, as kuma-dp's: the Prometheus
// text format 0.0.4, whatever the scraper's Accept says. OpenMetrics
// would rename Envoy's counters (a _total suffix, and the per-code
// upstream_rq merged into upstream_rq_total), breaking the dashboards and
// alerts of users coming from kuma-dp.
var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

// ParseText reads Envoy's /stats?format=prometheus into metric families,
// sorted by name. Envoy writes what expfmt reads: each family as one
// group under one # TYPE line, label values escaped as expfmt escapes
// them (\\, \" and \n; Envoy 1.21 and later), every line ended by a
// newline, so a page cut short is an error rather than a partial answer.
//
// Names are checked by the legacy rules, where kuma-dp uses UTF-8
// validation: Envoy sanitizes its names to [a-zA-Z0-9_], and text 0.0.4
// carries only legacy names, so a quoted UTF-8 name, which Envoy never
// writes, would have to be renamed on the way out and could merge into
// another family, a page scrapers refuse.
func ParseText(text string) ([]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	byName, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	return slices.SortedFunc(maps.Values(byName), func(a, b *dto.MetricFamily) int {
		return cmp.Compare(a.GetName(), b.GetName())
	}), nil
}

// AddLabels gives every metric the extra labels it does not carry
// itself: its own label wins, since overwriting it could merge distinct
// series. le and quantile are left to the writer, which adds them to
// histograms and summaries.
func AddLabels(fams []*dto.MetricFamily, extra []*dto.LabelPair) {
	for _, f := range fams {
		for _, m := range f.Metric {
			own := m.Label
			for _, l := range extra {
				if !hasLabel(own, l.GetName()) && !writerLabel(f.GetType(), l.GetName()) {
					m.Label = append(m.Label, l)
				}
			}
		}
	}
}

func hasLabel(labels []*dto.LabelPair, name string) bool {
	return slices.ContainsFunc(labels, func(l *dto.LabelPair) bool { return l.GetName() == name })
}

func writerLabel(t dto.MetricType, name string) bool {
	return (name == model.BucketLabel && t == dto.MetricType_HISTOGRAM) ||
		(name == model.QuantileLabel && t == dto.MetricType_SUMMARY)
}

// WriteText writes fams in the Prometheus text format 0.0.4.
func WriteText(w io.Writer, fams []*dto.MetricFamily) error {
	enc := expfmt.NewEncoder(w, textFormat)
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

// Filter reads Envoy's Prometheus text and keeps what c selects, with c's
// extra labels: a scrape's answer before it is written.
func (c *Config) Filter(stats string) ([]*dto.MetricFamily, error) {
	fams, err := ParseText(stats)
	if err != nil {
		return nil, err
	}
	fams = c.Select(fams)
	AddLabels(fams, c.Labels())
	return fams, nil
}
