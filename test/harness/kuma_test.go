package harness

import (
	"testing"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

func TestZonesModelTheRunsKumaRelease(t *testing.T) {
	tests := []struct{ env, opt, want string }{
		{"", "", controlplane.Kuma30},
		{"2.14", "", controlplane.Kuma214},
		{"2.14", controlplane.Kuma30, controlplane.Kuma30},
		{"3.0", controlplane.Kuma214, controlplane.Kuma214},
	}
	for _, tc := range tests {
		t.Run(tc.env+"/"+tc.opt, func(t *testing.T) {
			t.Setenv(KumaEnv, tc.env)
			z := NewZoneWith(t, Binaries{}, controlplane.Options{Kuma: tc.opt})
			if got := z.CP.Kuma(); got != tc.want {
				t.Errorf("%s=%q, Options.Kuma %q: the zone models %q, want %q", KumaEnv, tc.env, tc.opt, got, tc.want)
			}
		})
	}
}
