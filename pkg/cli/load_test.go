package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// loaded is what loadConfig read.
type loaded struct {
	cfg *config.Config
	src *source
}

// loadWith loads as a command with these flags would; a problem comes
// back as its message.
func loadWith(t *testing.T, flags []config.Key, file string, env map[string]string, args ...string) (*loaded, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	if file != "" {
		path := filepath.Join(t.TempDir(), "zp.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addFlags(fs, flags...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, src, err := loadConfig(fs)
	if err != nil {
		return nil, err.Error()
	}
	return &loaded{cfg, src}, ""
}

// loadedAsExpected fails the test unless the problem message holds want
// (or, with want "", there is none), and says whether a config came back.
func loadedAsExpected(t *testing.T, msg, want string) bool {
	t.Helper()
	if want != "" {
		if !strings.Contains(msg, want) {
			t.Fatalf("got %q, want %q", msg, want)
		}
		return false
	}
	if msg != "" {
		t.Fatal(msg)
	}
	return true
}

// load loads as `run` would.
func load(t *testing.T, file string, env map[string]string, args ...string) (*config.Config, string) {
	t.Helper()
	l, msg := loadWith(t, runFlags, file, env, args...)
	if l == nil {
		return nil, msg
	}
	return l.cfg, msg
}

func TestPrecedenceFlagsEnvFileDefaults(t *testing.T) {
	cases := []struct {
		name  string
		file  string
		env   map[string]string
		args  []string
		drain time.Duration
		mesh  string
	}{
		{"default", "", nil, nil, 30 * time.Second, ""},
		{"file over default", "drain-time: 10s\nmesh: from-file\n", nil, nil, 10 * time.Second, "from-file"},
		{"env over file", "drain-time: 10s\nmesh: from-file\n", map[string]string{"ZONEPROXY_DRAIN_TIME": "20s", "ZONEPROXY_MESH": "from-env"}, nil, 20 * time.Second, "from-env"},
		{"flag over env", "drain-time: 10s\n", map[string]string{"ZONEPROXY_DRAIN_TIME": "20s"}, []string{"--drain-time", "5s", "--mesh", "from-flag"}, 5 * time.Second, "from-flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, msg := load(t, tc.file, tc.env, tc.args...)
			if msg != "" {
				t.Fatal(msg)
			}
			if c.DrainTime != tc.drain || c.Mesh != tc.mesh {
				t.Fatalf("drain %v mesh %q; want %v %q", c.DrainTime, c.Mesh, tc.drain, tc.mesh)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	file := "mesh: payments\ndrain-time: 30\nreadiness-port: lots\ndrian-time: 5s\nlabel: [a=b, broken]\n"
	_, msg := load(t, file, nil)
	wantProblems(t, msg, `--drain-time: 30 has no unit`, `--readiness-port: lots is not a whole number`,
		`unknown key "drian-time"`, `did you mean "drain-time"`, `--label: "broken" is not key=value`)
}

// wantProblems fails the test unless msg names every problem in want.
func wantProblems(t *testing.T, msg string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("missing %q in:\n%s", w, msg)
		}
	}
}

func TestLabelForms(t *testing.T) {
	cases := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want map[string]string
	}{
		{"flags", "", nil, []string{"--label", "a=1", "--label", "b=2"}, map[string]string{"a": "1", "b": "2"}},
		{"env", "", map[string]string{"ZONEPROXY_LABEL": "a=1,b=2"}, nil, map[string]string{"a": "1", "b": "2"}},
		{"file list", "label: [a=1, b=2]\n", nil, nil, map[string]string{"a": "1", "b": "2"}},
		{"file map", "label: {a: 1, b: two}\n", nil, nil, map[string]string{"a": "1", "b": "two"}},
		{"file map keeps key case", "label: {Team: a, kuma.io/ServiceTier: gold}\n", nil, nil, map[string]string{"Team": "a", "kuma.io/ServiceTier": "gold"}},
		{"flags keep commas and case", "", nil, []string{"--label", "Team=a,b"}, map[string]string{"Team": "a,b"}},
		// As written, not as YAML's numbers: the same as in the environment.
		{"file map keeps number-like text", "label: {release: 2.10, build: 0755, big: 1e3, yes: true}\n", nil, nil,
			map[string]string{"release": "2.10", "build": "0755", "big": "1e3", "yes": "true"}},
		{"file list keeps number-like text", "label: [release=2.10]\n", nil, nil, map[string]string{"release": "2.10"}},
		{"env gives the same", "", map[string]string{"ZONEPROXY_LABEL": "release=2.10,build=0755"}, nil, map[string]string{"release": "2.10", "build": "0755"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, msg := load(t, tc.file, tc.env, tc.args...)
			if msg != "" {
				t.Fatal(msg)
			}
			got := c.Labels
			if len(got) != len(tc.want) {
				t.Fatalf("got %v want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("got %v want %v", got, tc.want)
				}
			}
		})
	}
}

// Text settings read from the file are the text written, and typed ones
// convert as they do from the environment.
func TestFileValuesAreTheirText(t *testing.T) {
	c, msg := load(t, "mesh: 1.10\nname: 010\negress-port: 12000\ndrain-time: 45s\nxds-relay: false\n", nil)
	if msg != "" {
		t.Fatal(msg)
	}
	if c.Mesh != "1.10" || c.Name != "010" || c.EgressPort != 12000 || c.DrainTime != 45*time.Second || c.XDSRelay {
		t.Errorf("mesh %q name %q egress-port %d drain-time %v xds-relay %v", c.Mesh, c.Name, c.EgressPort, c.DrainTime, c.XDSRelay)
	}
	for _, tc := range []struct{ file, want string }{
		{"admin-port: 9901.0\n", "9901.0 is not a whole number"}, // refused as ZONEPROXY_ADMIN_PORT=9901.0 is
		{"mesh: a\nmesh: b\n", `"mesh" is set twice`},
		{"base: &b {a: 1}\nlabel: *b\n", "aliases"},
		{"- a\n- b\n", "must be settings"},
	} {
		if _, msg := load(t, tc.file, nil); !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %q, want it to mention %q", tc.file, msg, tc.want)
		}
	}
}

func TestMissingConfigFile(t *testing.T) {
	_, msg := load(t, "", nil, "--config", "/nonexistent/zp.yaml")
	if !strings.Contains(msg, "--config: cannot read /nonexistent/zp.yaml") {
		t.Fatal(msg)
	}
}

func TestMisspeltEnvironmentVariable(t *testing.T) {
	_, msg := load(t, "", map[string]string{"ZONEPROXY_DRAIN_TIMEOUT": "5s"})
	if !strings.Contains(msg, "ZONEPROXY_DRAIN_TIMEOUT: not a setting") || !strings.Contains(msg, "did you mean ZONEPROXY_DRAIN_TIME?") {
		t.Fatal(msg)
	}
}

// Only the upper-case name is read: another case would be ignored.
func TestEnvironmentVariableInTheWrongCase(t *testing.T) {
	_, msg := load(t, "", map[string]string{"ZONEPROXY_Drain_Time": "5s"})
	if !strings.Contains(msg, "ZONEPROXY_Drain_Time: not a setting") || !strings.Contains(msg, "did you mean ZONEPROXY_DRAIN_TIME?") {
		t.Fatal(msg)
	}
}

func TestEmptyEnvironmentVariableClearsTheFile(t *testing.T) {
	c, msg := load(t, "ca-cert-file: /etc/zoneproxy/ca.pem\n", map[string]string{"ZONEPROXY_CA_CERT_FILE": ""})
	if msg != "" || c.CACertFile != "" {
		t.Fatalf("%q %q", c.CACertFile, msg)
	}
	// A number, a duration or a switch goes back to its default.
	c, msg = load(t, "egress-port: 12000\ndrain-time: 10s\nxds-relay: false\n",
		map[string]string{"ZONEPROXY_EGRESS_PORT": "", "ZONEPROXY_DRAIN_TIME": "", "ZONEPROXY_XDS_RELAY": ""})
	if msg != "" || c.EgressPort != config.DefaultEgressPort || c.DrainTime != config.DefaultDrainTime || !c.XDSRelay {
		t.Fatalf("egress-port %d drain-time %v xds-relay %v: %q", c.EgressPort, c.DrainTime, c.XDSRelay, msg)
	}
}

// --envoy-arg: one argument per flag or list item, as given (spaces and
// commas kept); space-separated in the environment.
func TestEnvoyArgForms(t *testing.T) {
	cases := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want []string
		err  string
	}{
		{name: "flags", args: []string{"--envoy-arg", "--log-format", "--envoy-arg", "[%l] %v, %n", "--envoy-arg=--stats-tag a:b"},
			want: []string{"--log-format", "[%l] %v, %n", "--stats-tag a:b"}},
		{name: "an empty flag", args: []string{"--envoy-arg", ""}, want: []string{""}},
		{name: "env", env: map[string]string{"ZONEPROXY_ENVOY_ARG": " --disable-extensions  envoy.a,envoy.b "},
			want: []string{"--disable-extensions", "envoy.a,envoy.b"}},
		{name: "file list", file: "envoy-arg: [--log-format, '[%l] %v', --base-id-path, 7]\n",
			want: []string{"--log-format", "[%l] %v", "--base-id-path", "7"}},
		{name: "file string", file: "envoy-arg: --stats-tag a:b\n", want: []string{"--stats-tag", "a:b"}},
		{name: "flag over env", env: map[string]string{"ZONEPROXY_ENVOY_ARG": "--from-env"}, args: []string{"--envoy-arg", "--from-flag"},
			want: []string{"--from-flag"}},
		{name: "empty env clears the file", file: "envoy-arg: [--x]\n", env: map[string]string{"ZONEPROXY_ENVOY_ARG": ""}, want: []string{}},
		{name: "file nested list", file: "envoy-arg: [[--x]]\n", err: `--envoy-arg: a list (["--x"]) is not an argument`},
		{name: "file map", file: "envoy-arg: {a: b}\n", err: `--envoy-arg: a map ({"a":"b"}) is not a list of arguments`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, msg := load(t, tc.file, tc.env, tc.args...)
			if !loadedAsExpected(t, msg, tc.err) {
				return
			}
			if strings.Join(c.EnvoyArgs, "|") != strings.Join(tc.want, "|") || len(c.EnvoyArgs) != len(tc.want) {
				t.Fatalf("got %q want %q", c.EnvoyArgs, tc.want)
			}
		})
	}
}

func TestEnvoyComponentLogLevelFromEveryPlace(t *testing.T) {
	for _, tc := range []struct {
		file string
		env  map[string]string
		args []string
	}{
		{args: []string{"--envoy-component-log-level", "upstream:debug"}},
		{env: map[string]string{"ZONEPROXY_ENVOY_COMPONENT_LOG_LEVEL": "upstream:debug"}},
		{file: "envoy-component-log-level: upstream:debug\n"},
	} {
		t.Run("", func(t *testing.T) {
			c, msg := load(t, tc.file, tc.env, tc.args...)
			if msg != "" || c.EnvoyComponentLogLevel != "upstream:debug" {
				t.Errorf("%+v: %q", tc, msg)
			}
		})
	}
}

// A flag's bad number or boolean is reported as typed, not read as 0 or false.
func TestBadFlagValuesAreReported(t *testing.T) {
	_, msg := load(t, "", nil, "--readiness-port", "lots", "--xds-relay=nope", "--drain-time", "30")
	wantProblems(t, msg, `--readiness-port: lots is not a whole number`, `--xds-relay: "nope" is not true or false`, `--drain-time: 30 has no unit`)
}

// --state-dir's default is derived unless the operator gave one, "" too.
func TestStateDirSetOnlyWhenGiven(t *testing.T) {
	set := func(file string, env map[string]string, args ...string) func(t *testing.T) bool {
		return func(t *testing.T) bool {
			c, msg := load(t, file, env, args...)
			if msg != "" {
				t.Fatal(msg)
			}
			return c.StateDirSet
		}
	}
	for name, tc := range map[string]struct {
		load func(t *testing.T) bool
		want bool
	}{
		"default":        {set("", nil), false},
		"flag":           {set("", nil, "--state-dir", "/var/lib/zp"), true},
		"empty variable": {set("", map[string]string{"ZONEPROXY_STATE_DIR": ""}), true},
		"file":           {set("state-dir: ''\n", nil), true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.load(t); got != tc.want {
				t.Errorf("StateDirSet %v, want %v", got, tc.want)
			}
		})
	}
}

// Every setting of run lands in the Config as its kind says.
func TestEverySettingHasItsField(t *testing.T) {
	fields := 0
	for _, name := range runFlags {
		s, _ := lookupSetting(string(name))
		dst, ok := s.Field(&config.Config{})
		if ok {
			fields++
		}
		if name == "config" {
			if ok {
				t.Error("--config lands in the Config")
			}
			continue
		}
		var fits bool
		switch dst.(type) {
		case *string:
			fits = s.Kind == config.KindText
		case *int:
			fits = s.Kind == config.KindNumber
		case *time.Duration:
			fits = s.Kind == config.KindDuration
		case *bool:
			fits = s.Kind == config.KindBool
		case *map[string]string, *[]string:
			fits = s.Kind == config.KindList
		}
		if !fits {
			t.Errorf("--%s (kind %d) lands in %T", name, s.Kind, dst)
		}
	}
	if fields != len(runFlags)-1 {
		t.Errorf("%d fields for %d settings", fields, len(runFlags)-1)
	}
}
