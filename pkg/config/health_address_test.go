package config

import (
	"strings"
	"testing"
)

// --health-address: a /ready listener for load balancers, every mistake
// named with the fix.
func TestHealthAddress(t *testing.T) {
	for _, tc := range []struct {
		name, addr, listener, err string
	}{
		{"unset: none", "", "", ""},
		{"every address", "0.0.0.0:9904", "0.0.0.0:9904", ""},
		{"one address", "10.0.0.5:9904", "10.0.0.5:9904", ""},
		{"no port", "0.0.0.0", "", `--health-address: "0.0.0.0" is not host:port: use an IP of this host and a port, e.g. 0.0.0.0:9904 for every address (or leave it unset for /ready on loopback only)`},
		{"a host name", "lb.example:9904", "", `--health-address: "lb.example:9904": "lb.example" is not an IP address`},
		{"port zero", "0.0.0.0:0", "", `--health-address: "0.0.0.0:0": "0" is not a port: use 1-65535`},
		{"the readiness port", "0.0.0.0:9902", "", "--health-address: port 9902 is also --readiness-port: give each its own port"},
		{"the egress port", "0.0.0.0:10002", "", "--health-address: port 10002 is also --egress-port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkListenerSetting(t, RoleEgress, func(c *Config) { c.HealthAddress = tc.addr }, (*Config).HealthListener, tc.listener, tc.err)
		})
	}
	c := valid()
	c.Role, c.HealthAddress, c.MetricsAddress = RoleEgress, "0.0.0.0:9904", "0.0.0.0:9904"
	if err := c.ValidateResource(); err == nil || !strings.Contains(err.Error(), "--health-address: port 9904 is also --metrics-address") {
		t.Errorf("health and metrics on one port: %v", err)
	}
}
