package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

func findCommand(t *testing.T, path ...string) *cobra.Command {
	t.Helper()
	cmd, rest, err := NewRootCommand().Find(path)
	if err != nil || len(rest) > 0 {
		t.Fatalf("no command %v: %v", path, err)
	}
	return cmd
}

func flagNames(cmd *cobra.Command) map[string]bool {
	out := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { out[f.Name] = true })
	return out
}

// Each command lists the flags it uses and no other.
func TestEachCommandTakesOnlyTheFlagsItUses(t *testing.T) {
	cases := []struct {
		path    []string
		has     []string
		lacks   []string
		exactly []config.Key // when set, the whole list (besides --help)
	}{
		{path: []string{"render", "dataplane"}, exactly: dataplaneFlags},
		{path: []string{"render", "meshzoneaddress"},
			has:   []string{"zone", "advertised-address", "advertised-port", "mesh", "role", "address", "ingress-port"},
			lacks: []string{"drain-time", "retry-max", "egress-port", "label", "cp-address", "dataplane-token-file", "envoy-arg"}},
		{path: []string{"bootstrap"},
			has:   []string{"cp-address", "ca-cert-file", "dataplane-token-file", "envoy-binary", "work-dir", "readiness-port", "label"},
			lacks: []string{"drain-time", "drain-min", "retry-initial", "retry-max", "bootstrap-timeout", "concurrency", "envoy-arg", "envoy-log-level", "metrics-address", "zone"}},
		// check validates everything run would: it takes run's flags.
		// and the hidden check a reload runs first (pkg/upgrade/inplace/reload.go).
		{path: []string{"run"}, exactly: append(slices.Clone(runFlags), upgrade.CheckFlag)},
		// check also finds a unit's configuration by its instance name.
		{path: []string{"check"}, exactly: append(slices.Clone(runFlags), "instance", "instance-dir")},
		{path: []string{"version"}, exactly: []config.Key{"output"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.path, " "), func(t *testing.T) {
			got := flagNames(findCommand(t, tc.path...))
			delete(got, "help")
			for _, f := range tc.has {
				if !got[f] {
					t.Errorf("lacks --%s", f)
				}
			}
			for _, f := range tc.lacks {
				if got[f] {
					t.Errorf("takes --%s, which it does not use", f)
				}
			}
			if tc.exactly != nil {
				want := map[string]bool{}
				for _, f := range tc.exactly {
					want[string(f)] = true
					if !got[string(f)] {
						t.Errorf("lacks --%s", f)
					}
				}
				for f := range got {
					if !want[f] {
						t.Errorf("takes --%s, which it does not use", f)
					}
				}
			}
		})
	}
}

func TestRunTakesEverySettingButMeshZoneAddresss(t *testing.T) {
	got := flagNames(findCommand(t, "run"))
	for _, s := range config.Settings() {
		name := string(s.Key)
		if got[name] == (name == "zone" || name == "advertised-address" || name == "advertised-port") {
			t.Errorf("run --%s: %v", name, got[name])
		}
	}
}

// Help names each flag's variable.
func TestHelpNamesEachFlagsVariable(t *testing.T) {
	for _, path := range [][]string{{"run"}, {"check"}, {"render", "dataplane"}, {"render", "meshzoneaddress"}, {"bootstrap"}} {
		cmd := findCommand(t, path...)
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if _, setting := lookupSetting(f.Name); !setting {
				return // --help, --instance: the command's own, not a setting
			}
			want := "(env ZONEPROXY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")) + ")"
			if !strings.Contains(f.Usage, want) {
				t.Errorf("%s --%s: usage %q lacks %s", cmd.CommandPath(), f.Name, f.Usage, want)
			}
		})
		if help := cmd.UsageString(); !strings.Contains(help, "(env ZONEPROXY_MESH)") {
			t.Errorf("%s --help does not show the variables:\n%s", cmd.CommandPath(), help)
		}
	}
}

// One env file and config serve every command: a setting another command
// uses is read, not refused, where the command has no flag for it.
func TestSharedEnvironmentAndFile(t *testing.T) {
	cases := []struct {
		name  string
		flags []config.Key
		file  string
		env   map[string]string
		check func(t *testing.T, c *loaded)
		err   string
	}{
		{name: "render reads run's settings from the environment", flags: dataplaneFlags,
			env:   map[string]string{"ZONEPROXY_DRAIN_TIME": "45s", "ZONEPROXY_ENVOY_ARG": "--stats-tag a:b", "ZONEPROXY_ZONE": "zone-1"},
			check: func(t *testing.T, c *loaded) { wantDrain(t, c, 45*time.Second) }},
		{name: "and from the file", flags: dataplaneFlags, file: "mesh: m\nretry-max: 9s\ndrain-time: 45s\nzone: zone-1\nadvertised-port: 443\n",
			check: func(t *testing.T, c *loaded) { wantDrain(t, c, 45*time.Second) }},
		{name: "run accepts meshzoneaddress's settings", flags: runFlags, file: "zone: zone-1\nadvertised-address: 203.0.113.10\n",
			env: map[string]string{"ZONEPROXY_ADVERTISED_PORT": "443"}, check: func(t *testing.T, c *loaded) {}},
		{name: "meshzoneaddress reads its own from the environment", flags: meshZoneAddressFlags,
			env: map[string]string{"ZONEPROXY_ZONE": "zone-1"}, check: func(t *testing.T, c *loaded) {
				if c.src.text("zone") != "zone-1" {
					t.Errorf("zone %q", c.src.text("zone"))
				}
			}},
		{name: "a variable of no command is refused", flags: dataplaneFlags,
			env: map[string]string{"ZONEPROXY_DRAIN_TIMEOUT": "5s"}, err: "ZONEPROXY_DRAIN_TIMEOUT: not a setting of zoneproxy (did you mean ZONEPROXY_DRAIN_TIME?)"},
		{name: "a key of no command is refused", flags: meshZoneAddressFlags,
			file: "zones: zone-1\n", err: `unknown key "zones"`},
		{name: "kuma-dp's name is translated", flags: runFlags,
			env: map[string]string{"ZONEPROXY_BINARY_PATH": "/usr/bin/envoy"}, err: "ZONEPROXY_BINARY_PATH: not a setting of zoneproxy (kuma-dp's --binary-path is ZONEPROXY_ENVOY_BINARY here)"},
		{name: "kuma-dp's key too", flags: runFlags,
			file: "config-dir: /run/zp\n", err: `(kuma-dp's --config-dir is "work-dir" here)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if c, msg := loadWith(t, tc.flags, tc.file, tc.env); loadedAsExpected(t, msg, tc.err) {
				tc.check(t, c)
			}
		})
	}
}

func wantDrain(t *testing.T, c *loaded, d time.Duration) {
	t.Helper()
	if c.cfg.DrainTime != d {
		t.Errorf("drain time %s, want %s", c.cfg.DrainTime, d)
	}
}
