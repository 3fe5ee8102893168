package dataplane

import "strings"

// SanitizeName turns s into a valid Kuma resource name (an RFC 1123
// subdomain): lowercase, other characters become '-', runs collapse, and
// it is trimmed to 253 characters with alphanumeric ends.
func SanitizeName(s string) string {
	return sanitize(s, 253, true)
}

// SanitizeLabel turns s into a DNS-1035 label (for kuma.io/workload):
// like SanitizeName without dots, at most 63 characters, starting with a letter.
func SanitizeLabel(s string) string {
	out := sanitize(s, 63, false)
	if out != "" && (out[0] < 'a' || out[0] > 'z') {
		out = sanitize("x-"+out, 63, false)
	}
	return out
}

func sanitize(s string, max int, dots bool) string {
	var b strings.Builder
	lastSep := true // drop leading separators
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			lastSep = false
		case r == '.' && dots:
			if !lastSep {
				b.WriteRune('.')
				lastSep = true
			}
		default:
			if !lastSep {
				b.WriteRune('-')
				lastSep = true
			}
		}
	}
	out := b.String()
	if len(out) > max {
		out = out[:max]
	}
	return strings.TrimRight(out, "-.")
}
