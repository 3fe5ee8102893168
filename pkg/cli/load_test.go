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

func load(t *testing.T, file string, env map[string]string, args ...string) (*config.Config, string) {
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
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addFlags(fs, runFlags...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig(fs)
	if err != nil {
		return nil, err.Error()
	}
	return cfg, ""
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
	for _, want := range []string{
		`--drain-time: 30 has no unit`,
		`--readiness-port: lots is not a whole number`,
		`unknown key "drian-time"`, `did you mean "drain-time"`,
		`--label: "broken" is not key=value`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
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

func TestEmptyEnvironmentVariableClearsTheFile(t *testing.T) {
	c, msg := load(t, "ca-cert-file: /etc/zoneproxy/ca.pem\n", map[string]string{"ZONEPROXY_CA_CERT_FILE": ""})
	if msg != "" || c.CACertFile != "" {
		t.Fatalf("%q %q", c.CACertFile, msg)
	}
}
