package dataplane

import (
	"strings"
	"testing"
)

func TestNameShapes(t *testing.T) {
	tests := []struct {
		name  string
		match func(string) bool
		good  []string
		bad   []string
	}{
		{"mesh", validMeshName, []string{"payments", "a", "9lives", "a_b", "a-b", "a-"},
			[]string{"", "Payments", "_a", "-a", "a.b", "x y", "ä"}},
		{"dns1123", validDNS1123Subdomain, []string{"a", "zp.example.com", "a-b", "1.2.3.4"},
			[]string{"", "a.", ".a", "a..b", "a-", "-a", "ZP.example.com", "a_b", "a.-b"}},
		{"dns1035", validDNS1035Label, []string{"a", "a-b", "backend1"}, []string{"", "9lives", "a-", "a.b", "A"}},
		{"label name", validLabelName, []string{"a", "App_1.x-y", strings.Repeat("a", 63)},
			[]string{"", "_a", "a_", "a.", strings.Repeat("a", 64), "a\n"}},
		{"hostname", validHostname, []string{"zp.example.com", "zp.example.com.", "ZP.Example.COM", "a"},
			[]string{"", "zp.example.com..", ".a", "a-.b", "x y"}},
	}
	for _, tt := range tests {
		for _, s := range tt.good {
			if !tt.match(s) {
				t.Errorf("%s(%q) = false, want true", tt.name, s)
			}
		}
		for _, s := range tt.bad {
			if tt.match(s) {
				t.Errorf("%s(%q) = true, want false", tt.name, s)
			}
		}
	}
}
