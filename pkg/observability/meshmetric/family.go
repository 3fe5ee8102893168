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
// The text codec is hand-written on the standard library because the
// field's is too slow for a scrape: prometheus/common/expfmt, which
// kuma-dp uses, takes over 200 ms of CPU and 1.1 million allocations to
// parse a 50k-line Envoy page and over 30 ms to write it again, where
// this package's whole scrape (parse, profile, write) takes 20-30 ms on
// the same machine and has a budget of 30 ms (BenchmarkExpfmt and
// BenchmarkScrape; docs/benchmarks.md). The tests check the codec
// against expfmt instead (expfmt_test.go): on what Envoy writes both
// read the same samples, and expfmt reads the answer as ParseText does.
package meshmetric

// Type is a metric family's type as its # TYPE line declares it.
type Type uint8

const (
	Untyped Type = iota
	Counter
	Gauge
	Histogram
	Summary
)

func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	case Summary:
		return "summary"
	}
	return "untyped"
}

// Label is one name="value" pair, unescaped.
type Label struct {
	Name, Value string
}

// Sample is one line of the exposition.
type Sample struct {
	// Name is the series name: the family's name, or for histograms and
	// summaries the family's name plus _bucket, _sum or _count.
	Name   string
	Labels []Label
	Value  float64
	// Timestamp is in milliseconds; 0 when the line carried none (Envoy
	// never sends one).
	Timestamp int64
}

// Family is a metric family: every sample under one # TYPE line.
type Family struct {
	Name    string
	Type    Type
	Help    string
	Samples []Sample
}

// Label returns the value of the named label and whether it is present.
func (s *Sample) Label(name string) (string, bool) {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}
