package config

import (
	"strings"
	"testing"
	"time"
)

// Each message points at the setting that is wrong, not at one that only
// looks wrong because of it.
func TestMessagesPointAtTheMistake(t *testing.T) {
	boundToEgress := `{"Mesh":"payments","Workload":"zone-proxy-payments-egress"}`
	cases := []struct {
		name    string
		mutate  func(t *testing.T, c *Config) // before Complete derives names
		says    []string
		neither []string
	}{
		{"mistyped role: the workload made from it is not blamed",
			func(t *testing.T, c *Config) {
				c.Role = "egres"
				c.DataplaneTokenFile = tokenFile(t, boundToEgress, 0o600)
			},
			[]string{`--role: "egres" is not a role: use ingress, egress or combined`},
			[]string{"--workload", "workload"}},
		{"mistyped role and a workload given: the workload is still compared",
			func(t *testing.T, c *Config) {
				c.Role, c.Workload = "egres", "billing"
				c.DataplaneTokenFile = tokenFile(t, boundToEgress, 0o600)
			},
			[]string{`--role: "egres" is not a role`, `this proxy's workload is "billing"; set --workload zone-proxy-payments-egress`},
			nil},
		{"no mesh: named, with the token's mesh",
			func(t *testing.T, c *Config) {
				c.Mesh = ""
				c.DataplaneTokenFile = tokenFile(t, boundToEgress, 0o600)
			},
			[]string{`--mesh: required: the mesh this zone proxy serves, the dataplane token is for mesh "payments": --mesh payments`},
			[]string{`--mesh ""`, "issue", "workload"}},
		{"no mesh and no token: an example",
			func(_ *testing.T, c *Config) { c.Mesh = "" },
			[]string{"--mesh: required: the mesh this zone proxy serves, e.g. --mesh payments"},
			nil},
		{"mistyped mesh: both values, and that one is likely a typo",
			func(t *testing.T, c *Config) {
				c.Mesh = "paymnets"
				c.DataplaneTokenFile = tokenFile(t, `{"Mesh":"payments"}`, 0o600)
			},
			[]string{`token is for mesh "payments", but --mesh is "paymnets": one of the two is likely a typo; set --mesh payments if this proxy serves that mesh`},
			[]string{"issue one with --mesh paymnets"}},
		{"cp-address without a scheme",
			func(_ *testing.T, c *Config) { c.CPAddress = "127.0.0.1:25678" },
			[]string{`--cp-address: "127.0.0.1:25678" has no scheme: did you mean https://127.0.0.1:25678?`},
			[]string{"first path segment", "parse"}},
		{"cp-address a host name alone",
			func(_ *testing.T, c *Config) { c.CPAddress = "cp.zone-1.internal" },
			[]string{"did you mean https://cp.zone-1.internal:5678?"},
			nil},
		{"cp-address host:port with a name",
			func(_ *testing.T, c *Config) { c.CPAddress = "cp.zone-1.internal:5678" },
			[]string{"did you mean https://cp.zone-1.internal:5678?"},
			[]string{"must start with"}},
		{"cp-address without a scheme but with a password",
			func(_ *testing.T, c *Config) { c.CPAddress = "u:hunter2@cp:5678" },
			[]string{"must not hold a user name or password"},
			[]string{"hunter2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{
				Mesh: "payments", Role: RoleEgress, Address: "127.0.0.1",
				IngressPort: DefaultIngressPort, EgressPort: DefaultEgressPort, AdminPort: DefaultAdminPort,
				CPAddress: DefaultCPAddress, EnvoyBinary: "envoy", ReadinessPort: DefaultReadinessPort,
				DrainTime: DefaultDrainTime, EnvoyLogLevel: "info", RetryInitial: time.Second, RetryMax: 5 * time.Second,
				LogLevel: "info", LogFormat: "console",
			}
			tc.mutate(t, &c)
			c.Complete(Host{Hostname: "vm1"})
			_, _, err := problems(t, c, time.Now())
			if err == nil {
				t.Fatal("no problem reported")
			}
			for _, want := range tc.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("lacks %q:\n%v", want, err)
				}
			}
			for _, not := range tc.neither {
				if strings.Contains(err.Error(), not) {
					t.Errorf("says %q:\n%v", not, err)
				}
			}
		})
	}
}
