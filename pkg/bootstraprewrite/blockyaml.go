package bootstraprewrite

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseBlockYAML reads the plain block YAML a control plane writes (kuma-cp
// renders its bootstrap with sigs.k8s.io/yaml: block mappings and
// sequences, one-line scalars, {} and []) about ten times faster than
// yaml.v3, which costs every start half a millisecond here. It gives up
// (ok false) on anything outside that subset, and the caller then parses
// with yaml.v3; what it accepts, it decodes exactly as yaml.v3 decodes into
// any (blockyaml_test.go checks both on the control plane's bootstraps, on
// generated documents and by fuzzing).
func parseBlockYAML(doc []byte) (object, bool) {
	if !plainText(doc) {
		return nil, false
	}
	p := &blockParser{}
	for _, raw := range strings.Split(string(doc), "\n") {
		content := strings.TrimLeft(raw, " ")
		if content == "" {
			continue // blank line
		}
		p.lines = append(p.lines, blockLine{indent: len(raw) - len(content), text: content})
	}
	if len(p.lines) == 0 || p.lines[0].indent != 0 {
		return nil, false
	}
	m, ok := p.mapping(0)
	if !ok || p.i != len(p.lines) {
		return nil, false
	}
	return m, true
}

// plainText takes only what YAML prints as it is: no control character
// but the line feed (no tab, no CR, no C1 control, which yaml.v3 refuses),
// no byte order mark, no Unicode line break (NEL, LS, PS), valid UTF-8.
func plainText(doc []byte) bool {
	for len(doc) > 0 {
		if b := doc[0]; b < utf8.RuneSelf {
			if b < 0x20 && b != '\n' || b == 0x7f {
				return false
			}
			doc = doc[1:]
			continue
		}
		r, size := utf8.DecodeRune(doc)
		switch {
		case r == utf8.RuneError && size <= 1,
			r >= 0x80 && r <= 0x9f,
			r == 0x2028, r == 0x2029, r == 0xfeff, r == 0xfffe, r == 0xffff:
			return false
		}
		doc = doc[size:]
	}
	return true
}

type blockLine struct {
	indent int
	text   string // without the indentation
}

type blockParser struct {
	lines []blockLine
	i     int
}

func isItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// mapping reads the entries at indent.
func (p *blockParser) mapping(indent int) (object, bool) {
	m := object{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent {
			break
		}
		if l.indent > indent || isItem(l.text) {
			return nil, false
		}
		k, rest, ok := splitKey(l.text)
		if _, dup := m[k]; !ok || dup {
			return nil, false // a duplicate is yaml.v3's error to report
		}
		p.i++
		var v any
		if rest != "" {
			v, ok = scalar(rest)
		} else {
			v, ok = p.nested(indent)
		}
		if !ok {
			return nil, false
		}
		m[k] = v
	}
	return m, true
}

// nested reads the value of a key that ended its line: a deeper mapping, a
// sequence (at the key's indent or deeper) or, with neither, null.
func (p *blockParser) nested(indent int) (any, bool) {
	if p.i == len(p.lines) {
		return nil, true
	}
	l := p.lines[p.i]
	switch {
	case l.indent >= indent && isItem(l.text):
		return p.sequence(l.indent)
	case l.indent > indent:
		return p.mapping(l.indent)
	}
	return nil, true
}

// sequence reads the items at indent. An item holding a mapping has its
// first entry on the dash's line and the others two columns right of it.
func (p *blockParser) sequence(indent int) ([]any, bool) {
	s := []any{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent || l.indent == indent && !isItem(l.text) {
			break
		}
		if l.indent > indent || l.text == "-" {
			return nil, false
		}
		item := strings.TrimLeft(l.text[2:], " ")
		if item == "" || isItem(item) || len(l.text)-len(item) != 2 {
			return nil, false
		}
		if _, _, isKey := splitKey(item); isKey {
			p.lines[p.i] = blockLine{indent: indent + 2, text: item}
			m, ok := p.mapping(indent + 2)
			if !ok {
				return nil, false
			}
			s = append(s, m)
			continue
		}
		v, ok := scalar(item)
		if !ok {
			return nil, false
		}
		s = append(s, v)
		p.i++
	}
	return s, true
}

// splitKey reads `key: value` or `key:`; ok false when text is not such an
// entry, or its key is not one this subset takes.
func splitKey(text string) (key, rest string, ok bool) {
	if text[0] == '\'' || text[0] == '"' {
		k, after, ok := quoted(text)
		if !ok || after != ":" && !strings.HasPrefix(after, ": ") {
			return "", "", false
		}
		return k, strings.TrimLeft(strings.TrimPrefix(after, ":"), " "), true
	}
	colon := strings.Index(text, ": ")
	switch {
	case colon >= 0:
		key, rest = text[:colon], strings.TrimLeft(text[colon+2:], " ")
	case strings.HasSuffix(text, ":"):
		key = text[:len(text)-1]
	default:
		return "", "", false
	}
	if !plainKey(key) {
		return "", "", false
	}
	return key, rest, true
}

// plainKey: an unquoted key that yaml.v3 reads as this very string.
func plainKey(k string) bool {
	if k == "" || len(k) > 1000 || k == "<<" || !plainScalar(k) {
		return false
	}
	v, ok := resolvePlain(k)
	s, isString := v.(string)
	return ok && isString && s == k
}

// plainScalar: an unquoted one-line scalar that needs no further rules.
func plainScalar(s string) bool {
	if strings.ContainsAny(s[:1], "-?:,[]{}#&*!|>'\"%@`") && !decimalInt(s) ||
		strings.HasSuffix(s, " ") || strings.HasSuffix(s, ":") ||
		strings.Contains(s, ": ") || strings.Contains(s, " #") {
		return false
	}
	return true
}

// scalar reads a value on a key's or an item's line.
func scalar(s string) (any, bool) {
	switch {
	case s == "{}":
		return object{}, true
	case s == "[]":
		return []any{}, true
	case s[0] == '\'' || s[0] == '"':
		v, after, ok := quoted(s)
		return v, ok && after == ""
	case !plainScalar(s):
		return nil, false
	}
	return resolvePlain(s)
}

// resolvePlain types an unquoted scalar as yaml.v3 does (resolve.go),
// for the forms this subset takes: ok false for the others.
func resolvePlain(s string) (any, bool) {
	switch s[0] {
	case 'y', 'Y', 'n', 'N', 't', 'T', 'f', 'F', 'o', 'O', '~':
		switch s {
		case "true", "True", "TRUE":
			return true, true
		case "false", "False", "FALSE":
			return false, true
		case "~", "null", "Null", "NULL":
			return nil, true
		}
		return s, true
	case '.':
		return nil, false // maybe a float
	case '+', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return resolveNumeric(s)
	}
	return s, true
}

// resolveNumeric follows yaml.v3's order for a scalar starting with a
// digit or a sign: a timestamp, an int or uint (Go syntax, _ allowed), a
// float, 0b/0o forms, else a string. It takes plain decimal ints and the
// strings (1.5s, 127.0.0.1) and leaves every other form to yaml.v3.
func resolveNumeric(s string) (any, bool) {
	if digits := strings.TrimLeft(s, "0123456789"); len(s)-len(digits) == 4 && strings.HasPrefix(digits, "-") {
		return nil, false // maybe a timestamp
	}
	plain := strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		if n, err := strconv.Atoi(s); err == nil && decimalInt(s) {
			return n, true
		}
		return nil, false
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil || yamlFloat(plain) {
		return nil, false
	}
	if yamlBinaryOrOctal(plain) {
		return nil, false
	}
	return s, true
}

// yamlBinaryOrOctal is yaml.v3's last try at an int: 0b/0o with optional
// minus. Anything else with that prefix stays a string there, as a build
// hash starting 0b does, so it need not leave the fast path.
func yamlBinaryOrOctal(plain string) bool {
	for _, form := range []struct {
		prefix string
		base   int
	}{{"0b", 2}, {"0o", 8}} {
		if rest, ok := strings.CutPrefix(plain, form.prefix); ok {
			// Its uint try needs no copy: ParseUint(plain, 0) took those.
			_, err := strconv.ParseInt(rest, form.base, 64)
			return err == nil
		}
		if rest, ok := strings.CutPrefix(plain, "-"+form.prefix); ok {
			_, err := strconv.ParseInt("-"+rest, form.base, 64)
			return err == nil
		}
	}
	return false
}

// yamlFloat: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
func yamlFloat(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	digits := func(s string) (int, string) {
		rest := strings.TrimLeft(s, "0123456789")
		return len(s) - len(rest), rest
	}
	n, rest := digits(s)
	if n == 0 {
		if !strings.HasPrefix(rest, ".") {
			return false
		}
		if n, rest = digits(rest[1:]); n == 0 {
			return false
		}
	} else if strings.HasPrefix(rest, ".") {
		_, rest = digits(rest[1:])
	}
	if rest != "" && (rest[0] == 'e' || rest[0] == 'E') {
		rest = rest[1:]
		if rest != "" && (rest[0] == '+' || rest[0] == '-') {
			rest = rest[1:]
		}
		if n, rest = digits(rest); n == 0 {
			return false
		}
	}
	return rest == ""
}

// decimalInt: -?(0|[1-9][0-9]*), at most 18 digits (always an int).
func decimalInt(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 18 || digits[0] == '0' && len(digits) > 1 {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// quoted reads a one-line quoted scalar at the start of s and returns
// what follows it.
func quoted(s string) (string, string, bool) {
	var b strings.Builder
	if s[0] == '\'' {
		for i := 1; i < len(s); i++ {
			if s[i] != '\'' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), s[i+1:], true
		}
		return "", "", false // continues on the next line
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			if i+1 == len(s) {
				return "", "", false
			}
			i++
			if r, ok := simpleEscapes[s[i]]; ok {
				b.WriteByte(r)
				continue
			}
			size := hexEscapeSize(s[i])
			if size == 0 || i+size >= len(s) {
				return "", "", false
			}
			n, err := strconv.ParseUint(s[i+1:i+1+size], 16, 32)
			if err != nil || n >= 0xd800 && n <= 0xdfff || n > utf8.MaxRune {
				return "", "", false
			}
			b.WriteRune(rune(n))
			i += size
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

// hexEscapeSize is the number of hex digits after \x, \u or \U; 0 for
// any other escape.
func hexEscapeSize(c byte) int {
	switch c {
	case 'x':
		return 2
	case 'u':
		return 4
	case 'U':
		return 8
	}
	return 0
}

var simpleEscapes = map[byte]byte{
	'\\': '\\', '"': '"', '/': '/', 'n': '\n', 't': '\t', 'r': '\r',
	'0': 0, 'a': '\a', 'b': '\b', 'v': '\v', 'f': '\f', 'e': 0x1b, ' ': ' ',
}
