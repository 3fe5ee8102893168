package dataplane

import (
	"regexp"
	"strings"
	"testing"
)

// The expressions the hand-written matchers stand for.
var nameShapes = []struct {
	name  string
	re    *regexp.Regexp
	match func(string) bool
}{
	{"mesh", regexp.MustCompile(`^[0-9a-z][0-9a-z_-]*$`), validMeshName},
	{"dns1123", regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`), validDNS1123Subdomain},
	{"dns1035", regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`), validDNS1035Label},
	{"label name", regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`), validLabelName},
	{"hostname", regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\.?$`), validHostname},
}

var nameSamples = []string{
	"", "a", "A", "0", "-", "_", ".", "..", "a.", ".a", "a..b", "a-", "-a", "a-b", "a--b", "a_b", "_a",
	"payments", "Payments", "zone-proxy-payments-egress-vm1", "zp.example.com", "zp.example.com.",
	"zp.example.com..", "ZP.Example.COM", "9lives", "a.-b", "a-.b", "x y", "ä", "a\n", "1.2.3.4", "a.b-c.d_e",
	"App_1.x-y", "a_", "a.", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("ab.", 21),
}

func TestNameMatchersAgreeWithTheirExpressions(t *testing.T) {
	for _, shape := range nameShapes {
		for _, s := range nameSamples {
			if got, want := shape.match(s), shape.re.MatchString(s); got != want {
				t.Errorf("%s(%q) = %v, the expression says %v", shape.name, s, got, want)
			}
		}
	}
}

func FuzzNameMatchers(f *testing.F) {
	for _, s := range nameSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, shape := range nameShapes {
			if got, want := shape.match(s), shape.re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, the expression says %v", shape.name, s, got, want)
			}
		}
	})
}
