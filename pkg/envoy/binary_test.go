package envoy

import (
	"regexp"
	"testing"
)

func TestVersionMatchersAgreeWithTheirExpressions(t *testing.T) {
	versionRe := regexp.MustCompile(`version:\s*(\S+)`)
	for _, out := range []string{
		"", "version:", "version: ", "version:x", "envoy  version: 50ef/1.39.0/Clean/RELEASE/BoringSSL\n",
		"\nenvoy  version: abc/1.39.0/Clean/RELEASE/BoringSSL\r\n\n", "version:\n\n  word tail", "version: \t\r\n",
		"version:  \nversion: second", "no version here", "Version: x", "xversion:y z",
	} {
		got, ok := versionField(out)
		m := versionRe.FindStringSubmatch(out)
		if ok != (m != nil) || ok && got != m[1] {
			t.Errorf("versionField(%q) = %q, %v; the expression finds %q", out, got, ok, m)
		}
	}
	semverRe := regexp.MustCompile(`^\d+\.\d+\.\d+([-+.][0-9A-Za-z.-]+)?$`)
	for _, s := range []string{"", "1", "1.39", "1.39.0", "1.39.0-dev", "1.39.0+build.5", "1.39.0.1", "1.39.0-",
		"1.39.0_x", "v1.39.0", "1..0", "1.39.0-dev ", "01.2.3", "1.39.0-a/b", "1.2.3-é"} {
		if got, want := semverish(s), semverRe.MatchString(s); got != want {
			t.Errorf("semverish(%q) = %v, the expression says %v", s, got, want)
		}
	}
}
