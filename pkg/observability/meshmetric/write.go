package meshmetric

import (
	"math"
	"strconv"
)

// ContentTypeText is the hijacker's one format, as kuma-dp's: the
// Prometheus text format 0.0.4, whatever the scraper's Accept says.
// OpenMetrics would rename Envoy's counters (a _total suffix, and the
// per-code upstream_rq merged into upstream_rq_total), breaking the
// dashboards and alerts of users coming from kuma-dp.
const ContentTypeText = "text/plain; version=0.0.4; charset=utf-8"

// AppendText appends fams in the Prometheus text format 0.0.4. Every
// sample also gets the extra labels it does not already have: the
// sample's own label wins, since overwriting it could merge distinct
// series into duplicates.
func AppendText(dst []byte, fams []Family, extra []Label) []byte {
	for i := range fams {
		f := &fams[i]
		if f.Help != "" {
			dst = append(dst, "# HELP "...)
			dst = append(dst, f.Name...)
			dst = append(dst, ' ')
			dst = appendEscaped(dst, f.Help, false)
			dst = append(dst, '\n')
		}
		dst = appendType(dst, f.Name, f.Type.String())
		for j := range f.Samples {
			dst = appendSample(dst, f.Samples[j].Name, &f.Samples[j], extra)
		}
	}
	return dst
}

func appendType(dst []byte, name, typ string) []byte {
	dst = append(dst, "# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, typ...)
	return append(dst, '\n')
}

func appendSample(dst []byte, name string, s *Sample, extra []Label) []byte {
	dst = append(dst, name...)
	sep := byte('{')
	for _, l := range s.Labels {
		dst = appendLabel(dst, sep, l)
		sep = ','
	}
	for _, l := range extra {
		if _, own := s.Label(l.Name); !own {
			dst = appendLabel(dst, sep, l)
			sep = ','
		}
	}
	if sep == ',' {
		dst = append(dst, '}')
	}
	dst = append(dst, ' ')
	dst = appendValue(dst, s.Value)
	if s.Timestamp != 0 {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, s.Timestamp, 10)
	}
	return append(dst, '\n')
}

func appendLabel(dst []byte, sep byte, l Label) []byte {
	dst = append(dst, sep)
	dst = append(dst, l.Name...)
	dst = append(dst, '=', '"')
	dst = appendEscaped(dst, l.Value, true)
	return append(dst, '"')
}

// appendEscaped escapes \ and newlines, and " when quote is set (label
// values).
func appendEscaped(dst []byte, s string, quote bool) []byte {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '\n' || c == '"' {
			clean = false
			break
		}
	}
	if clean {
		return append(dst, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '"' && quote:
			dst = append(dst, '\\', '"')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendValue writes integers without an exponent, as Envoy does.
func appendValue(dst []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.AppendInt(dst, int64(v), 10)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}
