package meshmetric

import (
	"math"
	"strconv"
	"strings"
)

// Content types of the two formats the hijacker answers in.
const (
	ContentTypeText        = "text/plain; version=0.0.4; charset=utf-8"
	ContentTypeOpenMetrics = "application/openmetrics-text; version=1.0.0; charset=utf-8"
)

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
			dst = appendSample(dst, f.Samples[j].Name, &f.Samples[j], extra, false)
		}
	}
	return dst
}

// AppendOpenMetrics appends fams in OpenMetrics 1.0, without the final
// "# EOF" line, which the caller writes once everything is in. Counter
// families lose a _total suffix and their samples gain it, as the spec
// requires; Envoy counters that end up with one name (upstream_rq_total
// and the per-code upstream_rq) are written as one family. A counter whose
// name would collide with another type's family stays as it was, typed
// unknown. Untyped families are unknown; timestamps turn into seconds.
func AppendOpenMetrics(dst []byte, fams []Family, extra []Label) []byte {
	om, next := openMetricsNames(fams)
	done := make([]bool, len(fams))
	for i := range fams {
		if done[i] {
			continue
		}
		f := &fams[i]
		typ := f.Type.String()
		switch {
		case f.Type == Untyped || (f.Type == Counter && om[i] == ""):
			typ = "unknown"
		}
		name := f.Name
		if f.Type == Counter && om[i] != "" {
			name = om[i]
		}
		dst = appendType(dst, name, typ)
		if f.Help != "" {
			dst = append(dst, "# HELP "...)
			dst = append(dst, name...)
			dst = append(dst, ' ')
			dst = appendEscaped(dst, f.Help, true)
			dst = append(dst, '\n')
		}
		for j := i; j >= 0; j = next[j] {
			done[j] = true
			series := ""
			if fams[j].Type == Counter && om[j] != "" {
				series = om[j] + "_total"
			}
			for k := range fams[j].Samples {
				s := &fams[j].Samples[k]
				n := s.Name
				if series != "" {
					n = series
				}
				dst = appendSample(dst, n, s, extra, true)
			}
		}
	}
	return dst
}

// openMetricsNames gives each counter its OpenMetrics family name ("" when
// that would collide with a family of another type) and links counters
// sharing a name: next[i] is the following member of i's group, or -1.
func openMetricsNames(fams []Family) (om []string, next []int) {
	om = make([]string, len(fams))
	next = make([]int, len(fams))
	others := make(map[string]bool)
	for i := range fams {
		next[i] = -1
		if fams[i].Type != Counter {
			others[fams[i].Name] = true
		}
	}
	last := make(map[string]int)
	for i := range fams {
		f := &fams[i]
		if f.Type != Counter {
			continue
		}
		base := strings.TrimSuffix(f.Name, "_total")
		if others[base] || others[base+"_total"] {
			continue
		}
		om[i] = base
		if prev, ok := last[base]; ok {
			next[prev] = i
		}
		last[base] = i
	}
	return om, next
}

func appendType(dst []byte, name, typ string) []byte {
	dst = append(dst, "# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, typ...)
	return append(dst, '\n')
}

func appendSample(dst []byte, name string, s *Sample, extra []Label, openMetrics bool) []byte {
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
		if openMetrics {
			dst = strconv.AppendFloat(dst, float64(s.Timestamp)/1000, 'f', -1, 64)
		} else {
			dst = strconv.AppendInt(dst, s.Timestamp, 10)
		}
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
// values; HELP text in OpenMetrics).
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
