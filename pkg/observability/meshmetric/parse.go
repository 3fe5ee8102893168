package meshmetric

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseText parses the Prometheus text format (0.0.4) as Envoy's
// /stats?format=prometheus writes it. Names and label values share the
// input's memory unless they carry escapes. Families keep their input
// order; samples without a # TYPE form untyped families of their own name.
//
// It is lenient where Envoy is sloppy: Envoy does not escape label values,
// so a backslash before anything but \, " or n is kept as it is.
func ParseText(text string) ([]Family, error) {
	lines := strings.Count(text, "\n") + 1
	p := parser{
		samples: make([]Sample, 0, lines),
		owner:   make([]int32, 0, lines),
		labels:  make([]Label, 0, 2*lines),
		cur:     -1,
	}
	for lineNo := 1; len(text) > 0; lineNo++ {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if err := p.line(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
	return p.finish(), nil
}

type parser struct {
	fams    []Family
	byName  map[string]int
	samples []Sample
	owner   []int32 // family index of each sample
	counts  []int   // samples per family
	labels  []Label // backing store of every sample's labels
	cur     int     // family of the last line
}

func (p *parser) line(line string) error {
	for line != "" && (line[len(line)-1] == ' ' || line[len(line)-1] == '\t' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	line = skipSpace(line)
	switch {
	case line == "":
		return nil
	case line[0] == '#':
		return p.comment(line)
	}
	return p.sample(line)
}

// comment handles # TYPE and # HELP; other comments are ignored.
func (p *parser) comment(line string) error {
	f := strings.Fields(line[1:])
	if len(f) < 2 || (f[0] != "TYPE" && f[0] != "HELP") {
		return nil
	}
	name := f[1]
	if !validName(name) {
		return fmt.Errorf("# %s: invalid metric name %q", f[0], name)
	}
	i := p.family(name)
	fam := &p.fams[i]
	if f[0] == "HELP" {
		_, help, _ := strings.Cut(strings.TrimLeft(line[1:], " \t")[len("HELP"):], name)
		fam.Help = unescapeHelp(strings.TrimLeft(help, " \t"))
		return nil
	}
	if len(f) != 3 {
		return fmt.Errorf("# TYPE %s: want one type, got %q", name, strings.Join(f[2:], " "))
	}
	typ := parseType(f[2])
	if i != p.cur && p.counts[i] > 0 {
		return fmt.Errorf("# TYPE %s after its samples", name)
	}
	fam.Type = typ
	p.cur = i
	return nil
}

// family returns the index of the family named name, adding it if new.
func (p *parser) family(name string) int {
	if p.cur >= 0 && p.fams[p.cur].Name == name {
		return p.cur
	}
	if i, ok := p.byName[name]; ok {
		return i
	}
	if p.byName == nil {
		p.byName = make(map[string]int, 256)
	}
	p.fams = append(p.fams, Family{Name: name})
	p.counts = append(p.counts, 0)
	p.byName[name] = len(p.fams) - 1
	return len(p.fams) - 1
}

func (p *parser) sample(line string) error {
	n := nameLen(line)
	if n == 0 {
		return fmt.Errorf("invalid metric name in %q", clip(line))
	}
	s := Sample{Name: line[:n]}
	rest := line[n:]
	if rest != "" && rest[0] == '{' {
		start := len(p.labels)
		var err error
		if rest, err = p.parseLabels(rest[1:]); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		s.Labels = p.labels[start:len(p.labels):len(p.labels)]
	}
	trimmed := skipSpace(rest)
	if len(trimmed) == len(rest) || trimmed == "" {
		return fmt.Errorf("%s: want a space and a value in %q", s.Name, clip(line))
	}
	value, ts := trimmed, ""
	for i := 0; i < len(trimmed); i++ {
		if trimmed[i] == ' ' || trimmed[i] == '\t' {
			value, ts = trimmed[:i], trimmed[i:]
			break
		}
	}
	v, ok := parseValue(value)
	if !ok {
		return fmt.Errorf("%s: invalid value %q", s.Name, value)
	}
	s.Value = v
	if ts = skipSpace(ts); ts != "" {
		var err error
		if s.Timestamp, err = strconv.ParseInt(ts, 10, 64); err != nil {
			return fmt.Errorf("%s: invalid timestamp %q", s.Name, ts)
		}
	}
	fam := p.owning(s.Name)
	p.samples = append(p.samples, s)
	p.owner = append(p.owner, int32(fam))
	p.counts[fam]++
	p.cur = fam
	return nil
}

// parseValue reads a sample value; most of Envoy's are small integers,
// which skip strconv.ParseFloat.
func parseValue(s string) (float64, bool) {
	if len(s) > 0 && len(s) < 16 {
		var n int64
		i := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			n = n*10 + int64(s[i]-'0')
		}
		if i == len(s) {
			return float64(n), true
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// owning finds the family a series belongs to: the current one (the
// common case), one declared earlier, or a new untyped family.
func (p *parser) owning(series string) int {
	if p.cur >= 0 && belongs(&p.fams[p.cur], series) {
		return p.cur
	}
	if i, ok := p.byName[series]; ok {
		return i
	}
	for _, suffix := range [...]string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok {
			if i, ok := p.byName[base]; ok && belongs(&p.fams[i], series) {
				return i
			}
		}
	}
	return p.family(series)
}

func belongs(f *Family, series string) bool {
	if series == f.Name {
		return true
	}
	if f.Type != Histogram && f.Type != Summary {
		return false
	}
	suffix, ok := strings.CutPrefix(series, f.Name)
	return ok && (suffix == "_sum" || suffix == "_count" || (suffix == "_bucket" && f.Type == Histogram))
}

// parseLabels reads `name="value",...}` and returns what follows the brace.
func (p *parser) parseLabels(s string) (string, error) {
	for {
		s = skipSpace(s)
		if s == "" {
			return "", fmt.Errorf("labels not closed with }")
		}
		if s[0] == '}' {
			return s[1:], nil
		}
		n := labelNameLen(s)
		if n == 0 {
			return "", fmt.Errorf("invalid label name at %q", clip(s))
		}
		name := s[:n]
		s = skipSpace(s[n:])
		if !strings.HasPrefix(s, "=") {
			return "", fmt.Errorf("label %s: want =", name)
		}
		s = skipSpace(s[1:])
		if !strings.HasPrefix(s, `"`) {
			return "", fmt.Errorf(`label %s: want a value in "quotes"`, name)
		}
		value, rest, ok := labelValue(s[1:])
		if !ok {
			return "", fmt.Errorf("label %s: value not closed with \"", name)
		}
		p.labels = append(p.labels, Label{Name: name, Value: value})
		s = skipSpace(rest)
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if !strings.HasPrefix(s, "}") {
			return "", fmt.Errorf("label %s: want , or } after the value", name)
		}
	}
}

// labelValue reads up to the closing quote, unescaping \\, \" and \n.
func labelValue(s string) (value, rest string, ok bool) {
	end := strings.IndexByte(s, '"')
	if end < 0 {
		return "", "", false
	}
	if strings.IndexByte(s[:end], '\\') < 0 {
		return s[:end], s[end+1:], true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), s[i+1:], true
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case '\\', '"':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte('\\')
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

func unescapeHelp(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	return strings.NewReplacer(`\\`, `\`, `\n`, "\n").Replace(s)
}

// finish hands each family its samples, in input order.
func (p *parser) finish() []Family {
	offsets := make([]int, len(p.fams)+1)
	for i, n := range p.counts {
		offsets[i+1] = offsets[i] + n
	}
	samples := p.samples
	if !slices.IsSorted(p.owner) { // a family's samples were split: gather them
		samples = make([]Sample, len(p.samples))
		next := slices.Clone(offsets)
		for i, o := range p.owner {
			samples[next[o]] = p.samples[i]
			next[o]++
		}
	}
	for i := range p.fams {
		p.fams[i].Samples = samples[offsets[i]:offsets[i+1]:offsets[i+1]]
	}
	return p.fams
}

func parseType(s string) Type {
	switch s {
	case "counter":
		return Counter
	case "gauge":
		return Gauge
	case "histogram":
		return Histogram
	case "summary":
		return Summary
	}
	return Untyped
}

// nameLen is the length of the metric name at the start of s.
func nameLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return i
	}
	return len(s)
}

func labelNameLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return i
	}
	return len(s)
}

// skipSpace drops leading blanks; strings.TrimLeft costs a set per call.
func skipSpace(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	return s
}

func validName(s string) bool { return s != "" && nameLen(s) == len(s) }

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
