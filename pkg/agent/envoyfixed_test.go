package agent

import (
	"slices"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// A reload refuses only what a restart must apply; Envoy's launch it
// applies through a handover.
func TestIdentityChanges(t *testing.T) {
	base := func() *config.Config {
		return &config.Config{Mesh: "payments", Role: "egress", Name: "zp-1", Address: "10.0.0.1", EgressPort: 10002,
			CPAddress: "https://cp:5678", XDSRelay: true, WorkDir: "/run/zoneproxy/zp-1", EnvoyBinary: "/usr/bin/envoy", Concurrency: 2, EnvoyLogLevel: "info"}
	}
	for _, tc := range []struct {
		name   string
		change func(*config.Config)
		want   []string
	}{
		{"nothing", func(*config.Config) {}, nil},
		{"Envoy's launch only", func(c *config.Config) {
			c.Concurrency, c.EnvoyLogLevel, c.EnvoyBinary, c.EnvoyArgs = 4, "debug", "/opt/envoy", []string{"--x"}
		}, nil},
		{"the address and the control plane", func(c *config.Config) { c.Address, c.CPAddress = "10.0.0.2", "https://cp2:5678" }, []string{"--address", "--cp-address"}},
		{"a label, with the launch", func(c *config.Config) { c.Labels, c.Concurrency = map[string]string{"team": "a"}, 4 }, []string{"--label"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := base()
			tc.change(next)
			if got := identityChanges(EnvoyFixed(base()), EnvoyFixed(next)); !slices.Equal(got, tc.want) {
				t.Errorf("identityChanges %v, want %v", got, tc.want)
			}
		})
	}
}
