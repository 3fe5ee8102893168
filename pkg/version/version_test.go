package version

import (
	"strings"
	"testing"
)

// Envoy of the minor release either supported Kuma is built with passes
// kuma-dp's check; any other is named incompatible.
func TestEnvoyCompatible(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"1.39.0", true},
		{"1.39.7", true},
		{"1.39.0-dev", true},
		{"1.37.2", true}, // Kuma 2.14's
		{"1.38.2", false},
		{"1.36.0", false},
		{"1.40.0", false},
		{"2.39.0", false},
		{"unknown", false},
		{"", false},
		{"1.39", false},
		{"a.39.0", false},
	}
	for _, tt := range tests {
		if got := EnvoyCompatible(tt.v); got != tt.want {
			t.Errorf("EnvoyCompatible(%q) = %v, want %v (Kuma expects %s)", tt.v, got, tt.want, ExpectedEnvoy())
		}
	}
}

// kuma-cp marks a data plane more than two minors from itself, another
// major included, as incompatible: each control plane must be told a
// version of its own line, and each release's Envoy is its own.
func TestEachControlPlaneIsToldItsOwnRelease(t *testing.T) {
	for _, tc := range []struct {
		delta     bool
		kuma      string
		envoy     string
		notEnvoys string
	}{
		{delta: false, kuma: "2.14.3", envoy: "1.37.4", notEnvoys: "1.39.0"},
		{delta: true, kuma: "3.0.0", envoy: "1.39.1", notEnvoys: "1.37.0"},
	} {
		r := ForADS(tc.delta)
		if r.Kuma != tc.kuma || r.DeltaADS != tc.delta {
			t.Errorf("ForADS(delta=%v) = %+v, want Kuma %s", tc.delta, r, tc.kuma)
		}
		if !r.EnvoyCompatible(tc.envoy) || r.EnvoyCompatible(tc.notEnvoys) {
			t.Errorf("Kuma %s: Envoy %s compatible %v, Envoy %s compatible %v", r.Kuma, tc.envoy, r.EnvoyCompatible(tc.envoy), tc.notEnvoys, r.EnvoyCompatible(tc.notEnvoys))
		}
	}
}

// `zoneproxy version` names every supported release and its Envoy.
func TestVersionNamesTheSupportedReleases(t *testing.T) {
	s := String()
	for _, want := range []string{"Kuma 3.0 with Envoy 1.39.x", "Kuma 2.14 with Envoy 1.37.x"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q does not say %q", s, want)
		}
	}
	info := Current()
	if info.Kuma != "3.0.0" || len(info.Supports) != 2 || info.Supports[1] != (ReleaseInfo{Kuma: "2.14.x", Envoy: "1.37.x", ADS: "sotw"}) {
		t.Errorf("Current() = %+v", info)
	}
}
