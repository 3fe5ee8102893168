package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	out, _, code := runEnvoy(t, nil, "--version")
	if code != 0 || out != "\nenvoy  version: 50ef0945fa2c5da4bff7627c3abf41fdd3b7cffd/1.39.0/Clean/RELEASE/BoringSSL\n\n" {
		t.Fatalf("code %d, stdout %q", code, out)
	}
	out, _, code = runEnvoy(t, []string{"ENVOY_STANDIN_VERSION_OUTPUT=envoy version: garbage\n"}, "--version")
	if code != 0 || out != "envoy version: garbage\n" {
		t.Fatalf("override: code %d, stdout %q", code, out)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "PARSE ERROR: Argument: --bogus\n             Couldn't find match for argument"},
		// TCLAP's delimiter is a space: '=' is not understood.
		{[]string{"--log-level=debug"}, "PARSE ERROR: Argument: --log-level=debug\n             Couldn't find match for argument"},
		{[]string{"--drain-time-s", "30s"}, "Couldn't read argument value from string '30s'"},
		{[]string{"--concurrency"}, "PARSE ERROR: Argument: (--concurrency)\n             Missing a value for this argument!"},
		{[]string{"-l", "info", "--log-level", "debug"}, "Argument already set!"},
		{[]string{"--log-level", "verbose"}, "error: invalid log level specified 'verbose'"},
		{[]string{"--drain-strategy", "slow"}, "error: unknown drain-strategy 'slow'"},
		{[]string{"--mode", "check"}, "error: unknown mode 'check'"},
		{[]string{"--component-log-level", "nosuch:debug"}, "error: invalid component specified 'nosuch'"},
	}
	for _, c := range cases {
		_, errOut, code := runEnvoy(t, nil, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: code %d, stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
}

func TestParseArgsAccepts(t *testing.T) {
	o, err := parseArgs([]string{"-c", "/x.yaml", "--drain-time-s", "30", "--drain-strategy", "immediate",
		"--disable-hot-restart", "-l", "warn", "--component-log-level", "upstream:debug,config:trace",
		"--concurrency 2", "--cpuset-threads", "--base-id", "7", "--use-dynamic-base-id",
		"--service-node", "n", "--service-cluster", "c", "--log-format", "%v", "--log-path", "/tmp/l",
		"--parent-shutdown-time-s", "40", "--mode", "validate", "--", "--anything"})
	if err != nil {
		t.Fatal(err)
	}
	if o.configPath != "/x.yaml" || o.drainTimeS != 30 || o.drainStrategy != "immediate" || !o.disableHotRestart ||
		o.logLevel != lvlWarn || len(o.componentLevels) != 2 || o.concurrency != 2 || o.baseID != 7 ||
		o.serviceNode != "n" || o.parentShutdownTimeS != 40 || o.mode != "validate" {
		t.Fatalf("%+v", o)
	}
	if len(o.warnings) != 1 {
		t.Fatalf("want the --concurrency/--cpuset-threads warning, got %q", o.warnings)
	}
	// --version wins when it comes before anything wrong, like TCLAP.
	if o, err := parseArgs([]string{"--version", "--bogus"}); err != nil || !o.showVersion {
		t.Fatalf("%v %v", o, err)
	}
	if _, err := parseArgs([]string{"--bogus", "--version"}); err == nil {
		t.Fatal("unknown flag before --version must fail")
	}
}

func TestMissingConfig(t *testing.T) {
	_, errOut, code := runEnvoy(t, nil, "--log-level", "info")
	want := "At least one of --config-path or --config-yaml or Options::configProto() should be non-empty"
	if code != 1 || !strings.Contains(errOut, "[critical][main]") || !strings.Contains(errOut, want) {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
}

func TestValidateGoodBootstrap(t *testing.T) {
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{Token: "header.payload.sig"})
	out, errOut, code := runEnvoy(t, nil, "--mode", "validate", "--config-path", path)
	if code != 0 || out != "configuration '"+path+"' OK\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "kuma-envoy-admin.sock")); err == nil {
		t.Fatal("validate mode must not bind the admin socket")
	}
}

func TestValidateRejects(t *testing.T) {
	dir := shortTempDir(t)
	good, err := os.ReadFile(writeBootstrap(t, dir, bootstrapParams{}))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, from, to, want string
	}{
		{"unknown field", "    name: system_ads\n", "    name: system_ads\n    bogusField: 1\n",
			"has unknown fields"},
		{"unknown @type", "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
			"type.googleapis.com/envoy.extensions.access_loggers.nope.v3.Nope", "Unable to parse JSON as proto (INVALID_ARGUMENT:"},
		{"empty cluster name", "    name: system_ads\n", "    name: \"\"\n", "Proto constraint validation failed"},
		{"invalid enum", "    type: STATIC\n", "    type: STATICALLY\n", "has unknown fields"},
		{"nested PGV in Any", "      path: /dev/null\n", "      path: \"\"\n", "Proto constraint validation failed"},
		{"unknown static secret", "name: cp_validation_ctx\n        sni", "name: other_ctx\n        sni",
			"Unknown static certificate validation context: other_ctx"},
		{"no node cluster", "  cluster: zp-egress\n", "", "ads: node 'id' and 'cluster' are required"},
		{"unknown ADS cluster", "clusterName: system_ads\n", "clusterName: nope\n", "Unknown gRPC client cluster 'nope'"},
		{"bad CA", "inlineBytes: ", "inlineBytes: bm90IGEgY2VydA==\n#", "Failed to load trusted CA certificates from <inline>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(string(good), c.from) {
				t.Fatalf("template lacks %q", c.from)
			}
			path := filepath.Join(dir, "bad.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(string(good), c.from, c.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runEnvoy(t, nil, "--mode", "validate", "-c", path)
			if code != 1 || out != "" || !strings.Contains(errOut, "error initializing configuration '"+path+"': ") || !strings.Contains(errOut, c.want) {
				t.Fatalf("code %d, stdout %q, stderr %q, want %q", code, out, errOut, c.want)
			}
		})
	}
}

func TestValidateJSONAndUnreadable(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "b.json")
	os.WriteFile(path, []byte(`{"node":{"id":"a","cluster":"b"},"static_resources":{"clusters":[{"name":"c","connect_timeout":"1s","load_assignment":{"cluster_name":"c"}}]}}`), 0o600)
	out, errOut, code := runEnvoy(t, nil, "--mode", "validate", "-c", path)
	if code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("code %d %q %q", code, out, errOut)
	}
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, nil, 0o600)
	_, errOut, code = runEnvoy(t, nil, "--mode", "validate", "-c", empty)
	if code != 1 || !strings.Contains(errOut, "': Unable to convert YAML as JSON: \n") {
		t.Fatalf("empty file: code %d %q", code, errOut)
	}
	_, errOut, code = runEnvoy(t, nil, "--mode", "validate", "-c", filepath.Join(dir, "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "unable to read file: ") {
		t.Fatalf("code %d %q", code, errOut)
	}
}
