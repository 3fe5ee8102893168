package dataplane

import (
	"regexp"
	"strings"
)

// The name shapes kuma-cp checks, as its own regular expressions.
var (
	validMeshName         = regexp.MustCompile(`^[0-9a-z][0-9a-z_-]*$`).MatchString
	validDNS1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`).MatchString
	validDNS1035Label     = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`).MatchString
	validLabelName        = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`).MatchString
	validHostname         = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\.?$`).MatchString
)

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
