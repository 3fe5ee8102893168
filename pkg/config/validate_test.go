package config

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
)

func valid() Config {
	c := Config{
		Mesh: "payments", Role: RoleEgress, Address: "127.0.0.1",
		IngressPort: DefaultIngressPort, EgressPort: DefaultEgressPort, AdminPort: DefaultAdminPort,
		CPAddress: DefaultCPAddress, EnvoyBinary: "envoy", ReadinessPort: DefaultReadinessPort,
		DrainTime: DefaultDrainTime, EnvoyLogLevel: "info", RetryInitial: time.Second, RetryMax: 5 * time.Second,
		LogLevel: "info", LogFormat: "console",
	}
	c.Complete(Host{Hostname: "vm1.example.com"})
	return c
}

func tokenFileContent(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"1"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

func tokenFile(t *testing.T, claims string, mode os.FileMode) string {
	t.Helper()
	return tokenFileRaw(t, tokenFileContent(claims), mode)
}

func tokenFileRaw(t *testing.T, raw string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(raw+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCompleteDerivesNames(t *testing.T) {
	c := valid()
	if c.Name != "zone-proxy-payments-egress-vm1" || c.Workload != "zone-proxy-payments-egress" {
		t.Fatalf("name %q workload %q", c.Name, c.Workload)
	}
	c2 := Config{Mesh: "payments", Role: RoleIngress}
	c2.Complete(Host{Hostname: "VM_2", FirstIPv4: "10.0.0.5", RuntimeDirectory: "/run/zoneproxy/x"})
	if c2.Name != "zone-proxy-payments-ingress-vm-2" || c2.Address != "10.0.0.5" || c2.WorkDir != "/run/zoneproxy/x" {
		t.Fatalf("%+v", c2)
	}
}

func TestValidate(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name   string
		mutate func(t *testing.T, c *Config)
		errs   []string
		warns  []string
	}{
		{"valid", func(*testing.T, *Config) {}, nil, []string{"no dataplane token"}},
		{"combined ports collide", func(_ *testing.T, c *Config) { c.Role = RoleCombined; c.IngressPort = 10002 },
			[]string{"--egress-port: port 10002 is also --ingress-port"}, nil},
		{"readiness collides with egress", func(_ *testing.T, c *Config) { c.ReadinessPort = 10002 },
			[]string{"--egress-port: port 10002 is also --readiness-port"}, nil},
		{"port out of range", func(_ *testing.T, c *Config) { c.EgressPort = 70000 }, []string{"--egress-port: 70000 is not a port"}, nil},
		{"wildcard address", func(_ *testing.T, c *Config) { c.Address = "0.0.0.0" },
			[]string{"--address: must not be 0.0.0.0 or ::"}, nil},
		{"no address found", func(_ *testing.T, c *Config) { c.Address = "" }, []string{"--address: no non-loopback IPv4"}, nil},
		{"work dir relative", func(_ *testing.T, c *Config) { c.WorkDir = "run/zp" }, []string{"--work-dir: \"run/zp\" must be an absolute path"}, nil},
		{"work dir too long", func(_ *testing.T, c *Config) { c.WorkDir = "/" + strings.Repeat("d", 90) }, []string{"--work-dir:", "at most 81"}, nil},
		{"levels and formats", func(_ *testing.T, c *Config) { c.EnvoyLogLevel = "loud"; c.LogLevel = "trace"; c.LogFormat = "xml" },
			[]string{"--envoy-log-level", "--log-level", "--log-format"}, nil},
		{"cache max age negative", func(_ *testing.T, c *Config) { c.StateDir = "/var/lib/zp"; c.CacheMaxAge = -time.Hour },
			[]string{"--cache-max-age: -1h0m0s is negative"}, nil},
		{"cache max age zero with a cache", func(_ *testing.T, c *Config) { c.StateDir = "/var/lib/zp"; c.CacheMaxAge = 0 },
			[]string{`--cache-max-age: 0 would never serve the cache it keeps: set --state-dir "" to keep none`}, nil},
		{"cache max age zero without a cache", func(_ *testing.T, c *Config) { c.StateDir = ""; c.CacheMaxAge = 0 }, nil, []string{"no dataplane token"}},
		{"retry bounds", func(_ *testing.T, c *Config) { c.RetryInitial = 0; c.RetryMax = -1 }, []string{"--retry-initial", "--retry-max"}, nil},
		{"cp address", func(_ *testing.T, c *Config) { c.CPAddress = "http://cp:5681" }, []string{"--cp-address: \"http://cp:5681\" must start with https://"}, nil},
		{"cp address with an empty query", func(_ *testing.T, c *Config) { c.CPAddress = "https://cp:5678?" }, []string{"--cp-address: \"https://cp:5678?\" must not have a query or fragment"}, nil},
		{"cp address with a fragment", func(_ *testing.T, c *Config) { c.CPAddress = "https://cp:5678#x" }, []string{"must not have a query or fragment"}, nil},
		{"cp address with a password", func(_ *testing.T, c *Config) { c.CPAddress = "http://u:secret@cp:5678/x" }, []string{"--cp-address: must not hold a user name or password"}, nil},
		{"ca file missing", func(_ *testing.T, c *Config) { c.CACertFile = "/nonexistent/ca.pem" }, []string{"--ca-cert-file: cannot read /nonexistent/ca.pem"}, nil},
		{"both tokens", func(t *testing.T, c *Config) { c.DataplaneToken = "x"; c.DataplaneTokenFile = "/t" }, []string{"not both"}, nil},
		{"token file missing", func(_ *testing.T, c *Config) { c.DataplaneTokenFile = "/nonexistent/token" }, []string{"--dataplane-token-file: /nonexistent/token does not exist"}, nil},
		{"token file empty", func(t *testing.T, c *Config) {
			p := filepath.Join(t.TempDir(), "empty")
			_ = os.WriteFile(p, []byte("\n"), 0o600)
			c.DataplaneTokenFile = p
		}, []string{"is empty"}, nil},
		{"token file is a directory", func(t *testing.T, c *Config) { c.DataplaneTokenFile = t.TempDir() },
			[]string{"is a directory, not a regular file: the token file must be a regular file", "write the token into one (mode 0600) and give its path"}, nil},
		{"token file not a JWT", func(t *testing.T, c *Config) { c.DataplaneTokenFile = tokenFileRaw(t, "garbage", 0o600) },
			[]string{"--dataplane-token-file: the token in", "is not a JWT (expected three dot-separated parts); generate one with `kumactl generate dataplane-token --mesh payments`"}, nil},
		{"token for another mesh", func(t *testing.T, c *Config) { c.DataplaneTokenFile = tokenFile(t, `{"Mesh":"billing"}`, 0o600) },
			[]string{`token is for mesh "billing"`}, nil},
		{"token expired, clock synchronised", func(t *testing.T, c *Config) { c.DataplaneTokenFile = tokenFile(t, `{"exp":1700000000}`, 0o600) },
			[]string{"--dataplane-token-file: the token in", "token expired at 2023-11-14T22:13:20Z", "issue a new one"}, nil},
		{"token expired, clock not synchronised", func(t *testing.T, c *Config) {
			clockStatus = func() timesync.Status { return timesync.Status{} }
			c.DataplaneTokenFile = tokenFile(t, `{"exp":1700000000}`, 0o600)
		}, nil, []string{"--dataplane-token-file: the system clock is not synchronised (NTP); the token in", "expired at 2023-11-14T22:13:20Z", "keeps going"}},
		{"token expired, clock unknown", func(t *testing.T, c *Config) {
			clockStatus = func() timesync.Status { return timesync.Status{Err: errors.New("adjtimex: operation not permitted")} }
			c.DataplaneTokenFile = tokenFile(t, `{"exp":1700000000}`, 0o600)
		}, nil, []string{"may not be synchronised (NTP): zoneproxy cannot tell (adjtimex: operation not permitted)", "expired"}},
		{"token not valid yet, clock synchronised", func(t *testing.T, c *Config) { c.DataplaneTokenFile = tokenFile(t, `{"nbf":1800000600}`, 0o600) },
			nil, []string{"is not valid yet: token is not valid before 2027-01-15T08:10:00Z", "refuses Envoy until then"}},
		{"token not valid yet, clock not synchronised", func(t *testing.T, c *Config) {
			clockStatus = func() timesync.Status { return timesync.Status{} }
			c.DataplaneToken = tokenFileContent(`{"nbf":1800000600}`)
		}, nil, []string{"--dataplane-token: the system clock is not synchronised (NTP); the token looks unusable: token is not valid before"}},
		{"token readable by others", func(t *testing.T, c *Config) { c.DataplaneTokenFile = tokenFile(t, `{"Mesh":"payments"}`, 0o644) },
			nil, []string{"mode 0644"}},
		{"inline token warns", func(t *testing.T, c *Config) {
			enc := base64.RawURLEncoding.EncodeToString
			c.DataplaneToken = enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{}`)) + ".c2ln"
		}, nil, []string{"process list"}},
		{"address is a host name", func(_ *testing.T, c *Config) { c.Address = "zp1.example.internal" },
			[]string{`--address: "zp1.example.internal" is not an IP address`}, nil},
		{"label key not a qualified name", func(_ *testing.T, c *Config) { c.Labels = map[string]string{"bad key!": "x"} },
			[]string{`--label: "bad key!" is not a label key`}, nil},
		{"label value with a space", func(_ *testing.T, c *Config) { c.Labels = map[string]string{"team": "payments core"} },
			[]string{`--label: team="payments core": a label value is at most 63`}, nil},
		{"label value too long", func(_ *testing.T, c *Config) { c.Labels = map[string]string{"team": strings.Repeat("a", 64)} },
			[]string{"--label: team=", "at most 63"}, nil},
		{"label the control plane sets", func(_ *testing.T, c *Config) { c.Labels = map[string]string{"kuma.io/mesh": "billing"} },
			[]string{"--label: kuma.io/mesh is set by the control plane"}, nil},
		{"labels kuma-cp takes", func(_ *testing.T, c *Config) {
			c.Labels = map[string]string{"team": "payments", "example.com/tier": "edge_1.2", "empty": ""}
		}, nil, []string{"no dataplane token"}},
		{"token wrapped over lines", func(t *testing.T, c *Config) {
			tok := tokenFileContent(`{"Mesh":"payments"}`)
			c.DataplaneTokenFile = tokenFileRaw(t, tok[:20]+"\n"+tok[20:], 0o600)
		}, []string{"a line break or NUL inside the token (was it wrapped?)"}, nil},
		{"the token given as the path", func(t *testing.T, c *Config) {
			c.DataplaneTokenFile = filepath.Join(t.TempDir(), tokenFileContent(`{"Mesh":"payments"}`))
		}, []string{"--dataplane-token-file: the value is a token, not a path"}, nil},
		{"workload label via --label", func(_ *testing.T, c *Config) { c.Labels = map[string]string{"kuma.io/workload": "x"} }, []string{"--workload instead"}, nil},
		{"bad workload", func(_ *testing.T, c *Config) { c.Workload = "Bad_Workload" }, []string{"--workload: invalid workload"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			clockStatus = func() timesync.Status { return timesync.Status{Synced: true} }
			t.Cleanup(func() { clockStatus = timesync.Check })
			tc.mutate(t, &c)
			warns, err := c.Validate(now)
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
			if tok := tokenFileContent(`{"Mesh":"payments"}`); strings.Contains(msg, tok[len(tok)/2:]) {
				t.Errorf("the token is in the error: %v", msg)
			}
			var wmsg []string
			for _, w := range warns {
				wmsg = append(wmsg, w.Error())
			}
			for _, want := range tc.warns {
				if !strings.Contains(strings.Join(wmsg, "\n"), want) {
					t.Errorf("missing warning %q in %v", want, wmsg)
				}
			}
		})
	}
}

func TestValidateListsAllMistakes(t *testing.T) {
	c := Config{Role: "sideways", EgressPort: 0, ReadinessPort: 0, EnvoyLogLevel: "x", LogLevel: "x", LogFormat: "x", CPAddress: "nope"}
	_, err := c.Validate(time.Now())
	if err == nil {
		t.Fatal("want errors")
	}
	if n := strings.Count(err.Error(), "* "); n < 7 {
		t.Fatalf("only %d problems reported:\n%v", n, err)
	}
}

func TestValidEnvoyLoggerName(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"a", true}, {"upstream", true}, {"http2", true}, {"a_b", true}, {long, true},
		{"", false}, {"_a", false}, {"1a", false}, {"A", false}, {"aB", false}, {"a-b", false},
		{"a:b", false}, {"a b", false}, {long + "a", false}, {"ä", false}, {"upstream\n", false},
	} {
		if got := ValidEnvoyLoggerName(tc.name); got != tc.want {
			t.Errorf("ValidEnvoyLoggerName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The interface table is read only when --address is not given.
func TestCompleteLooksUpTheAddressOnlyWhenNeeded(t *testing.T) {
	looked := 0
	h := Host{Hostname: "vm", lookupIPv4: func() (string, string) { looked++; return "10.0.0.7", "the address of eth0" }}
	given := Config{Mesh: "m", Role: RoleEgress, Address: "192.0.2.1"}
	given.Complete(h)
	if looked != 0 || given.Address != "192.0.2.1" {
		t.Errorf("with --address: looked %d times, address %q", looked, given.Address)
	}
	derived := Config{Mesh: "m", Role: RoleEgress}
	derived.Complete(h)
	if looked != 1 || derived.Address != "10.0.0.7" {
		t.Errorf("without --address: looked %d times, address %q", looked, derived.Address)
	}
}

// However long the mesh name, the derived name and workload keep the role
// (and the name the host): ingress and egress never share an identity.
func TestDerivedNamesKeepTheRole(t *testing.T) {
	for _, mesh := range []string{"payments", "payments-platform-team-eu-west-1-production-cluster", strings.Repeat("m", 250)} {
		workloads, names := map[string]Role{}, map[string]Role{}
		for _, role := range []Role{RoleIngress, RoleEgress, RoleCombined} {
			c := Config{Mesh: mesh, Role: role}
			c.Complete(Host{Hostname: "vm1.example", FirstIPv4: "10.0.0.5"})
			if len(c.Workload) > 63 || !strings.HasSuffix(c.Workload, "-"+string(role)) || dataplane.SanitizeLabel(c.Workload) != c.Workload {
				t.Errorf("mesh of %d: workload %q (%d) for %s", len(mesh), c.Workload, len(c.Workload), role)
			}
			if len(c.Name) > 253 || !strings.HasSuffix(c.Name, "-"+string(role)+"-vm1") || dataplane.SanitizeName(c.Name) != c.Name {
				t.Errorf("mesh of %d: name %q (%d) for %s", len(mesh), c.Name, len(c.Name), role)
			}
			if other, dup := workloads[c.Workload]; dup {
				t.Errorf("mesh of %d: %s and %s share the workload %q", len(mesh), other, role, c.Workload)
			}
			if other, dup := names[c.Name]; dup {
				t.Errorf("mesh of %d: %s and %s share the name %q", len(mesh), other, role, c.Name)
			}
			workloads[c.Workload], names[c.Name] = role, role
		}
	}
}

// The default address is the default route's interface's, the one with the
// lowest metric, not the first interface in the kernel's order.
func TestDefaultRouteInterface(t *testing.T) {
	const head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	tests := []struct {
		name, table, want string
	}{
		{"one default route", head + "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", "eth0"},
		{"the lowest metric wins", head + "eth0\t00000000\t0100000A\t0003\t0\t0\t600\t00000000\t0\t0\t0\neth1\t00000000\t010010AC\t0003\t0\t0\t100\t00000000\t0\t0\t0\n", "eth1"},
		{"no default route", head + "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", ""},
		{"a host route to 0.0.0.0/32 is no default", head + "eth0\t00000000\t00000000\t0005\t0\t0\t0\tFFFFFFFF\t0\t0\t0\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		if got := defaultRouteInterface(tt.table); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Without --work-dir, a run by hand gets one work dir per name that
// outlives a restart (so its cache can be served), within the length
// Envoy's socket paths allow.
func TestCompleteDerivesAWorkDirPerName(t *testing.T) {
	long := strings.Repeat("n", 120)
	for _, tc := range []struct {
		name, runtime, userRuntime, want string
	}{
		{"systemd's", "/run/zoneproxy/payments-egress", "/run", "/run/zoneproxy/payments-egress"},
		{"root by hand", "", "/run", "/run/zoneproxy/zp-1"},
		{"a user by hand", "", "/run/user/1000", "/run/user/1000/zoneproxy/zp-1"},
		{"no runtime dir: a temporary one", "", "", ""},
	} {
		c := Config{Mesh: "m", Role: RoleEgress, Name: "zp-1"}
		c.Complete(Host{Hostname: "vm", FirstIPv4: "10.0.0.5", RuntimeDirectory: tc.runtime, UserRuntimeDir: tc.userRuntime})
		if c.WorkDir != tc.want {
			t.Errorf("%s: work dir %q, want %q", tc.name, c.WorkDir, tc.want)
		}
	}
	dirs := map[string]bool{}
	for _, name := range []string{long, long + "x", long + "y"} {
		c := Config{Mesh: "m", Role: RoleEgress, Name: name}
		c.Complete(Host{Hostname: "vm", FirstIPv4: "10.0.0.5", UserRuntimeDir: "/run/user/1000"})
		if len(c.WorkDir) > MaxWorkDirLen || !strings.HasPrefix(c.WorkDir, "/run/user/1000/zoneproxy/nnnn") || dirs[c.WorkDir] {
			t.Errorf("a long name's work dir %q (%d characters; at most %d, one per name)", c.WorkDir, len(c.WorkDir), MaxWorkDirLen)
		}
		dirs[c.WorkDir] = true
	}
}
