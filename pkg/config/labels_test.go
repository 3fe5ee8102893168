package config

import (
	"regexp"
	"strings"
	"testing"
)

func TestLabelSyntax(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	keys := []struct {
		key  string
		want bool
	}{
		{"app", true},
		{"App_1.x-y", true},
		{"team.example.com/owner", true},
		{"a/b", true},
		{"k8s.io/" + long(63), true},
		{"k8s.io/" + long(64), false},
		{long(63), true},
		{long(64), false},
		{"", false},
		{"-app", false},
		{"app-", false},
		{"app.", false},
		{"_app", false},
		{"a b", false},
		{"a/b/c", false},
		{"/app", false},
		{"Example.com/app", false}, // the prefix is lower case
		{"ex..com/app", false},     // an empty DNS label
		{"-ex.com/app", false},     // a label begins with a hyphen
		{"ex-.com/app", false},     // ... or ends with one
		{"ex_a.com/app", false},    // no underscore in a DNS name
		{"e-x.c0m/app", true},
		{"example.com/", false},
		{strings.Repeat("a.", 126) + "a/app", true}, // 253
		{strings.Repeat("a.", 126) + "ab/app", false},
		{"ünï/app", false},
	}
	for _, tc := range keys {
		if got := qualifiedName(tc.key); got != tc.want {
			t.Errorf("qualifiedName(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
	values := []struct {
		value string
		want  bool
	}{
		{"", true},
		{"v1", true},
		{"1.2_3-x", true},
		{long(63), true},
		{long(64), false},
		{"-v", false},
		{"v.", false},
		{"a/b", false},
		{"a b", false},
	}
	for _, tc := range values {
		if got := labelValue(tc.value); got != tc.want {
			t.Errorf("labelValue(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
}

// The rules as kuma-cp's validation (Kubernetes' apimachinery) writes them,
// as regular expressions, must agree with the hand-written checks.
func FuzzLabelSyntaxMatchesTheRegularExpressions(f *testing.F) {
	name := regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	prefix := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	for _, s := range []string{"app", "a.b/c", "-x", "x-", "a..b/c", "a/b/c", "", "A/b", "a_b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := name.MatchString(s)
		if p, n, ok := strings.Cut(s, "/"); ok {
			want = len(p) <= 253 && prefix.MatchString(p) && name.MatchString(n)
		}
		if got := qualifiedName(s); got != want {
			t.Fatalf("qualifiedName(%q) = %v, the regular expressions say %v", s, got, want)
		}
		if got, want := labelValue(s), s == "" || name.MatchString(s); got != want {
			t.Fatalf("labelValue(%q) = %v, the regular expressions say %v", s, got, want)
		}
	})
}
