package version

import "testing"

func TestEnvoyCompatible(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"1.39.0", true},
		{"1.39.7", true},
		{"1.39.0-dev", true},
		{"1.38.2", false},
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
