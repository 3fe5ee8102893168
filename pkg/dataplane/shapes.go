package dataplane

import "strings"

// Matchers for the name shapes kuma-cp checks, written out by hand: the
// equivalent regular expressions (shapes_test.go checks the two agree)
// cost every start 0.1 ms to compile.

func lowerAlnum(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

func alnum(b byte) bool { return lowerAlnum(b) || b >= 'A' && b <= 'Z' }

// validMeshName: ^[0-9a-z][0-9a-z_-]*$
func validMeshName(s string) bool {
	if s == "" || !lowerAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !lowerAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// dnsLabel: one label of ok characters and '-', not starting or ending with '-'.
func dnsLabel(s string, ok func(byte) bool) bool {
	if s == "" || !ok(s[0]) || !ok(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !ok(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// dnsLabels: dot-separated dnsLabels, none empty.
func dnsLabels(s string, ok func(byte) bool) bool {
	for {
		label, rest, more := strings.Cut(s, ".")
		if !dnsLabel(label, ok) {
			return false
		}
		if !more {
			return true
		}
		s = rest
	}
}

// validDNS1123Subdomain: ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
func validDNS1123Subdomain(s string) bool { return dnsLabels(s, lowerAlnum) }

// validDNS1035Label: ^[a-z]([-a-z0-9]*[a-z0-9])?$
func validDNS1035Label(s string) bool {
	return s != "" && s[0] >= 'a' && s[0] <= 'z' && dnsLabel(s, lowerAlnum)
}

// ValidLabelKey is a Kubernetes qualified name, as kuma-cp requires of
// label keys: an optional DNS-subdomain prefix of at most 253 characters
// and '/', then a label name.
func ValidLabelKey(k string) bool {
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		return validLabelName(k)
	}
	return len(prefix) <= 253 && validDNS1123Subdomain(prefix) && validLabelName(name)
}

// ValidLabelValue is a Kubernetes label value, as kuma-cp requires.
func ValidLabelValue(v string) bool { return v == "" || validLabelName(v) }

// validLabelName: ^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$
func validLabelName(s string) bool {
	if s == "" || len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// validHostname: ^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\.?$
func validHostname(s string) bool { return dnsLabels(strings.TrimSuffix(s, "."), alnum) }
