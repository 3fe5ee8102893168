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
		err        string
	}{
		{"unset: beside /ready", "", RoleEgress, "", ""},
		{"the readiness address itself", "127.0.0.1:9902", RoleEgress, "", ""},
		{"every address", "0.0.0.0:9903", RoleEgress, "0.0.0.0:9903", ""},
		{"empty host is every address", ":9903", RoleEgress, ":9903", ""},
		{"another loopback port", "127.0.0.1:9903", RoleEgress, "127.0.0.1:9903", ""},
		{"IPv6", "[::]:9903", RoleEgress, "[::]:9903", ""},
		{"no port", "0.0.0.0", RoleEgress, "", `--metrics-address: "0.0.0.0" is not host:port: use an IP of this host and a port`},
		{"a host name", "metrics.example:9903", RoleEgress, "", `--metrics-address: "metrics.example:9903": "metrics.example" is not an IP address`},
		{"port out of range", "0.0.0.0:70000", RoleEgress, "", `--metrics-address: "0.0.0.0:70000": "70000" is not a port: use 1-65535`},
		{"port zero", "0.0.0.0:0", RoleEgress, "", `"0" is not a port`},
		{"port by name", "0.0.0.0:http", RoleEgress, "", `"http" is not a port`},
		{"the readiness port on every address", "0.0.0.0:9902", RoleEgress, "", "--metrics-address: port 9902 is also --readiness-port: give each its own port"},
		{"the admin port", "0.0.0.0:9901", RoleEgress, "", "--metrics-address: port 9901 is also --admin-port"},
		{"the egress port", "0.0.0.0:10002", RoleEgress, "", "--metrics-address: port 10002 is also --egress-port"},
		{"the ingress port of an egress is free", "0.0.0.0:10001", RoleEgress, "0.0.0.0:10001", ""},
		{"the ingress port of a combined proxy", "0.0.0.0:10001", RoleCombined, "", "--metrics-address: port 10001 is also --ingress-port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkListenerSetting(t, tc.role, func(c *Config) { c.MetricsAddress = tc.addr }, (*Config).MetricsListener, tc.listener, tc.err)
		})
	}
}

// checkListenerSetting validates a configuration with one listener
// address set, and checks the error it gives or the listener it derives.
func checkListenerSetting(t *testing.T, role Role, set func(*Config), listener func(*Config) (string, bool), want, wantErr string) {
	t.Helper()
	c := valid()
	c.Role = role
	set(&c)
	err := c.ValidateResource()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("got %v, want %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected: %v", err)
	}
	if got, separate := listener(&c); got != want || separate != (want != "") {
		t.Errorf("listener %q, %v; want %q", got, separate, want)
	}
}
