package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command line zoneproxy cannot run exits 64 with what to type instead.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		want  []string // in the output
		avoid []string // not in the output
	}{
		{"no command", nil, []string{"zoneproxy: which command? bootstrap, check, drain, reload, render, run, status, undrain, version", "Run 'zoneproxy --help'"}, nil},
		{"unknown command", []string{"rnu"}, []string{`unknown command "rnu" for "zoneproxy"`, "Did you mean this?\n\trun"}, nil},
		{"render without a resource", []string{"render"}, []string{"render which resource? dataplane or meshzoneaddress"}, nil},
		{"render an unknown resource", []string{"render", "dataplan"}, []string{`unknown resource "dataplan"`, `(did you mean "dataplane"?)`}, nil},
		{"an extra argument", []string{"run", "payments"}, []string{`zoneproxy run takes no arguments, got "payments"`, "Run 'zoneproxy run --help'"}, nil},
		{"an extra argument to render", []string{"render", "dataplane", "x"}, []string{"zoneproxy render dataplane takes no arguments"}, nil},
		{"a missing value", []string{"check", "--mesh"}, []string{"flag needs an argument: --mesh"}, nil},
		{"a misspelt flag", []string{"run", "--drain-tmie", "5s"}, []string{"unknown flag --drain-tmie (did you mean --drain-time?)"}, nil},
		{"a prefix of a flag", []string{"run", "--envoy-component", "x"}, []string{"(did you mean --envoy-component-log-level?)"}, nil},
		{"nothing close", []string{"run", "--frobnicate"}, []string{"unknown flag --frobnicate\n"}, []string{"did you mean"}},
		{"another command's flag", []string{"render", "dataplane", "--drain-time", "5s"}, []string{
			"unknown flag --drain-time: a flag of zoneproxy check, zoneproxy drain, zoneproxy run and zoneproxy undrain, not of zoneproxy render dataplane (ZONEPROXY_DRAIN_TIME and the config key drain-time are read by every command)"}, nil},
		{"kuma-dp's flag with an equivalent", []string{"run", "--binary-path", "/usr/bin/envoy"}, []string{"unknown flag --binary-path: kuma-dp's --binary-path is --envoy-binary in zoneproxy"}, nil},
		{"kuma-dp's flag a zone proxy needs not", []string{"run", "--dns-enabled=false"}, []string{"unknown flag --dns-enabled: kuma-dp's --dns-enabled is not needed for a zone proxy: zoneproxy runs no DNS proxy"}, nil},
		{"kuma-dp's one-letter flag", []string{"run", "-d", "dp.yaml"}, []string{"unknown flag -d (kuma-dp's --dataplane-file): not needed for a zone proxy"}, nil},
		// A kuma-dp unit's command line, translated in one go: every
		// flag is named, values that look like flags are skipped.
		{"a whole kuma-dp command line", []string{"run", "--cp-address", "https://cp:5678", "--binary-path", "/usr/bin/envoy",
			"--dns-enabled", "--config-dir", "/run/kuma", "--dataplane-file", "--mesh", "-v", "name=x", "--skip-verify", "--name", "zp-1", "--proxy-type", "ingress"},
			[]string{
				"unknown flag --binary-path: kuma-dp's --binary-path is --envoy-binary in zoneproxy\n",
				"unknown flag --dns-enabled: kuma-dp's --dns-enabled is not needed",
				"unknown flag --config-dir: kuma-dp's --config-dir is --work-dir in zoneproxy\n",
				"unknown flag --dataplane-file: kuma-dp's --dataplane-file is not needed",
				"unknown flag -v (kuma-dp's --dataplane-var): not needed for a zone proxy: there are no templates",
				"unknown flag --skip-verify: kuma-dp's --skip-verify is not supported: the control plane's certificate is always verified",
				"unknown flag --proxy-type: kuma-dp's --proxy-type is not needed for a zone proxy: the kind of zone proxy is --role",
			},
			[]string{"--cp-address:", "unknown flag --mesh", "unknown flag --name", "unknown flag --ingress"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := Main(tc.args, &out)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("lacks %q", w)
				}
			}
			for _, a := range tc.avoid {
				if strings.Contains(out.String(), a) {
					t.Errorf("has %q", a)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out.String())
			}
		})
	}
}

// Configuration problems stay 78, each named by where it was set: a
// setting that is not a flag of the command by its variable or file.
func TestConfigProblemsNameTheirSource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "zp.yaml")
	if err := os.WriteFile(file, []byte("mesh: payments\nrole: egress\naddress: 10.0.0.5\nretry-max: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"a variable render has no flag for", map[string]string{"ZONEPROXY_DRAIN_TIME": "soon"}, []string{"render", "dataplane", "--config", file},
			[]string{`ZONEPROXY_DRAIN_TIME: "soon" is not a duration`, "--config: retry-max in " + file + ": 5 has no unit"}},
		{"run has the flag", map[string]string{"ZONEPROXY_DRAIN_TIME": "soon"}, []string{"run", "--config", file},
			[]string{`--drain-time: "soon" is not a duration`, "--retry-max: 5 has no unit"}},
		{"the Envoy arguments", nil, []string{"check", "--config", file, "--retry-max", "5s", "--envoy-arg", "--concurrency 2", "--envoy-component-log-level", "upstream"},
			[]string{`--envoy-arg: "--concurrency 2" is the agent's to set: use --concurrency`, `--envoy-component-log-level: "upstream" is not <component>:<level>`}},
		{"meshzoneaddress's own settings with the others", map[string]string{"ZONEPROXY_ADVERTISED_PORT": "https"}, []string{"render", "meshzoneaddress", "--config", file},
			[]string{"(4 problems)", "--advertised-port: https is not a whole number", "--role: a MeshZoneAddress is for zone ingress", "--config: retry-max in"}},
		{"meshzoneaddress needs a zone", nil, []string{"render", "meshzoneaddress", "--config", file, "--role", "ingress"},
			[]string{"--zone: required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			if code := Main(tc.args, &out); code != 78 {
				t.Errorf("exit %d, want 78", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("lacks %q in:\n%s", w, out.String())
				}
			}
		})
	}
}
