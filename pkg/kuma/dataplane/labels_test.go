package dataplane

import (
	"strings"
	"testing"
)

func TestLabelKeysAndValues(t *testing.T) {
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
		{long(64), false},
		{"", false},
		{"-app", false},
		{"app.", false},
		{"a b", false},
		{"a/b/c", false},
		{"/app", false},
		{"Example.com/app", false}, // the prefix is lower case
		{"ex..com/app", false},     // an empty DNS label
		{"ex-.com/app", false},     // a DNS label ends with a hyphen
		{"ex_a.com/app", false},    // no underscore in a DNS name
		{"example.com/", false},
		{strings.Repeat("a.", 126) + "a/app", true}, // a 253-character prefix
		{strings.Repeat("a.", 126) + "ab/app", false},
	}
	for _, tc := range keys {
		if got := ValidLabelKey(tc.key); got != tc.want {
			t.Errorf("ValidLabelKey(%q) = %v, want %v", tc.key, got, tc.want)
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
	}
	for _, tc := range values {
		if got := ValidLabelValue(tc.value); got != tc.want {
			t.Errorf("ValidLabelValue(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
}
