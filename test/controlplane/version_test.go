package controlplane

import (
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// Cases from kuma's pkg/version/compatibility_test.go, then the releases
// this control plane models.
func TestDeploymentVersionCompatible(t *testing.T) {
	tests := []struct {
		cp, dp string
		want   bool
	}{
		{"1.4.1", "1.2.0", true},
		{"1.2.1", "1.4.0", true},
		{"1.4.0", "1.1.1", false},
		{"1.3.1", "1.6.5", false},
		{"1.4.0", "2.4.0", false},
		{"2.4.1", "1.4.1", false},
		{"1.4.0", "dev-1234", true},
		{"abc-dev-1234", "1.4.0", true},
		{"1.4.0", "1.4.0-preview.v1234", true},
		{"2.14.3", "2.12.0", true},
		{"2.14.3", "2.16.9", true},
		{"2.14.3", "2.11.9", false},
		{"2.14.3", "2.17.0", false},
		{"2.14.3", "3.0.0", false},
		{"2.14.3", "v2.14.3", true},
		{"2.14.3", "2.14.0-rc1", false},
		{"3.0.0", "2.14.3", false},
		{"3.0.0", "3.0.0", true},
		{"3.0.0", "3.2.1", true},
	}
	for _, tc := range tests {
		if got := deploymentVersionCompatible(tc.cp, tc.dp); got != tc.want {
			t.Errorf("kuma-cp %s, kuma-dp %s: compatible %t, want %t", tc.cp, tc.dp, got, tc.want)
		}
	}
}

// The verdict is recorded per proxy against the modelled release.
func TestProxiesRecordKumaCpCompatible(t *testing.T) {
	tests := []struct {
		kuma, dpVersion string
		want            bool
	}{
		{Kuma30, "3.0.0", true},
		{Kuma30, "2.14.3", false},
		{Kuma214, "2.14.3", true},
		{Kuma214, "3.0.0", false},
	}
	for _, tc := range tests {
		t.Run(tc.kuma+" "+tc.dpVersion, func(t *testing.T) {
			s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: tc.kuma})
			tok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-egress"})
			node := nodeFor(t, s, dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener), func(body map[string]any) {
				body["version"].(map[string]any)["kumaDp"].(map[string]any)["version"] = tc.dpVersion
				body["features"] = []string{"feature-reuse-port", "feature-delta-grpc"}
			})
			dialADS(t, s, tok, node).collect(hasAll(resourcev3.ListenerType, egressLDS))
			ps := s.Proxies()
			if len(ps) != 1 || ps[0].KumaDpVersion != tc.dpVersion || ps[0].KumaCpCompatible != tc.want {
				t.Errorf("proxies %+v, want kumaDpVersion %s kumaCpCompatible %t", ps, tc.dpVersion, tc.want)
			}
		})
	}
}
