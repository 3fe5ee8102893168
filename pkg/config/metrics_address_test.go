package config

import (
	"strings"
	"testing"
)

// --metrics-address: a second /metrics listener only when it differs from
// the readiness listener, and every mistake named with the fix.
func TestMetricsAddress(t *testing.T) {
	cases := []struct {
		name, addr string
		role       Role
		listener   string // "" when /metrics stays beside /ready only
		errs       []string
	}{
		{"unset: beside /ready", "", RoleEgress, "", nil},
		{"the readiness address itself", "127.0.0.1:9902", RoleEgress, "", nil},
		{"every address", "0.0.0.0:9903", RoleEgress, "0.0.0.0:9903", nil},
		{"empty host is every address", ":9903", RoleEgress, ":9903", nil},
		{"another loopback port", "127.0.0.1:9903", RoleEgress, "127.0.0.1:9903", nil},
		{"IPv6", "[::]:9903", RoleEgress, "[::]:9903", nil},
		{"no port", "0.0.0.0", RoleEgress, "", []string{`--metrics-address: "0.0.0.0" is not host:port: use an IP of this host and a port`}},
		{"a host name", "metrics.example:9903", RoleEgress, "", []string{`--metrics-address: "metrics.example:9903": "metrics.example" is not an IP address`}},
		{"port out of range", "0.0.0.0:70000", RoleEgress, "", []string{`--metrics-address: "0.0.0.0:70000": "70000" is not a port: use 1-65535`}},
		{"port zero", "0.0.0.0:0", RoleEgress, "", []string{`"0" is not a port`}},
		{"port by name", "0.0.0.0:http", RoleEgress, "", []string{`"http" is not a port`}},
		{"the readiness port on every address", "0.0.0.0:9902", RoleEgress, "", []string{"--metrics-address: port 9902 is also --readiness-port: give each its own port"}},
		{"the admin port", "0.0.0.0:9901", RoleEgress, "", []string{"--metrics-address: port 9901 is also --admin-port"}},
		{"the egress port", "0.0.0.0:10002", RoleEgress, "", []string{"--metrics-address: port 10002 is also --egress-port"}},
		{"the ingress port of an egress is free", "0.0.0.0:10001", RoleEgress, "0.0.0.0:10001", nil},
		{"the ingress port of a combined proxy", "0.0.0.0:10001", RoleCombined, "", []string{"--metrics-address: port 10001 is also --ingress-port"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.Role = tc.role
			c.MetricsAddress = tc.addr
			err := c.ValidateResource()
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if len(tc.errs) == 0 && err != nil {
				t.Fatalf("unexpected: %v", err)
			}
			for _, want := range tc.errs {
				if !strings.Contains(msg, want) {
					t.Errorf("missing %q in %v", want, msg)
				}
			}
			if len(tc.errs) > 0 {
				return // the agent never runs with it
			}
			got, separate := c.MetricsListener()
			if got != tc.listener || separate != (tc.listener != "") {
				t.Errorf("MetricsListener() = %q, %v; want %q", got, separate, tc.listener)
			}
		})
	}
}
