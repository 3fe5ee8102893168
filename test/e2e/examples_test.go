package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// examplesDir is the repository's examples/, relative to this package.
const examplesDir = "../../examples"

// exampleCase is one way an operator runs an example: a config file, and
// for an .env variant the environment systemd would load next to it.
type exampleCase struct {
	name    string            // subtest name, e.g. two-meshes/billing-egress.yaml
	config  string            // path of the YAML config
	env     []string          // ZONEPROXY_* entries from the .env file
	envVars map[string]string // the same, by variable name
}

// Every example config runs as written against the test control plane:
// `check` passes, `run` turns READY with the listeners its role implies,
// and SIGTERM stops it with exit 0. Only what must differ on a test
// machine is overridden, with flags (which win over the file and env).
func TestExamplesRunAsWritten(t *testing.T) {
	for _, ex := range discoverExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			runExample(t, ex)
		})
	}
}

func runExample(t *testing.T, ex exampleCase) {
	assertKnownVariables(t, ex)
	settings := exampleSettings(t, ex)
	mesh, role := settings["mesh"], settings["role"]
	workload := settings["workload"]
	if workload == "" {
		workload = "zone-proxy-" + mesh + "-" + role
	}
	wantListeners := map[string][]string{
		"egress":   {"self_zoneegress_dp_ze-port"},
		"ingress":  {"self_zoneingress_dp_zi-port"},
		"combined": {"self_zoneegress_dp_ze-port", "self_zoneingress_dp_zi-port"},
	}[role]
	if wantListeners == nil {
		t.Fatalf("%s: role %q is not ingress, egress or combined", ex.config, role)
	}

	zone := harness.NewZone(t, bins, mesh)
	readiness := harness.FreePort(t)
	overrides := []string{
		"--config", ex.config,
		"--cp-address", zone.CP.URL(),
		"--ca-cert-file", zone.CP.CACertFile(),
		"--dataplane-token-file", zone.TokenFile(mesh, workload),
		"--envoy-binary", bins.Envoy,
		"--work-dir", filepath.Join(zone.Dir, "wd"),
		"--address", "127.0.0.1",
		"--readiness-port", strconv.Itoa(readiness),
		"--admin-port", strconv.Itoa(harness.FreePort(t)),
	}
	if role != "egress" {
		overrides = append(overrides, "--ingress-port", strconv.Itoa(harness.FreePort(t)))
	}
	if role != "ingress" {
		overrides = append(overrides, "--egress-port", strconv.Itoa(harness.FreePort(t)))
	}

	if code, out, errOut := runCommand(t, ex.env, append([]string{"check"}, overrides...)...); code != 0 || !strings.Contains(out, "all checks passed") {
		t.Fatalf("zoneproxy check: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut := runCommand(t, ex.env, append([]string{"render", "dataplane"}, overrides...)...)
	if code != 0 {
		t.Fatalf("zoneproxy render dataplane: exit %d\n%s", code, errOut)
	}
	var dp struct {
		Mesh   string            `yaml:"mesh"`
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	if err := yaml.Unmarshal([]byte(out), &dp); err != nil {
		t.Fatalf("render dataplane output: %v\n%s", err, out)
	}
	if dp.Mesh != mesh || dp.Labels["kuma.io/workload"] != workload {
		t.Fatalf("rendered Dataplane has mesh %q workload %q, want %q %q", dp.Mesh, dp.Labels["kuma.io/workload"], mesh, workload)
	}
	if want := settings["name"]; want != "" && dp.Name != want {
		t.Fatalf("rendered Dataplane is named %q, want %q", dp.Name, want)
	}
	for k, v := range exampleLabels(t, ex) {
		if dp.Labels[k] != v {
			t.Errorf("label %s=%s from the example missing in the Dataplane: %v", k, v, dp.Labels)
		}
	}

	agent := harness.StartAgent(t, bins.Zoneproxy, ex.env, append([]string{"run"}, overrides...)...)
	agent.AwaitReadiness(readiness, 200, "READY", promptly)
	nodeID := mesh + "." + dp.Name
	harness.Eventually(t, promptly, fmt.Sprintf("the control plane to see %s with listeners %v", nodeID, wantListeners), func() bool {
		for _, px := range zone.CP.Proxies() {
			if px.NodeID == nodeID && px.Connected {
				return slices.Equal(sorted(px.Listeners), wantListeners)
			}
		}
		return false
	})

	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	if settings["log-format"] == "json" {
		assertJSONLines(t, agent.Output())
	}
}

// discoverExamples finds every zoneproxy config under examples/ and every
// .env file, which applies to the YAML file of the same name next to it.
// A YAML file that is neither a config nor a rendered Kuma resource fails
// the test, so a new example cannot be skipped by accident.
func discoverExamples(t *testing.T) []exampleCase {
	t.Helper()
	var cases []exampleCase
	err := filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(examplesDir, path)
		switch filepath.Ext(path) {
		case ".yaml", ".yml":
			doc := readYAMLMap(t, path)
			switch {
			case doc["type"] != nil:
				// A Kuma resource (MeshZoneAddress), checked by its own test.
			case doc["mesh"] != nil && doc["role"] != nil:
				cases = append(cases, exampleCase{name: rel, config: path})
			default:
				t.Errorf("%s is neither a zoneproxy config (mesh, role) nor a Kuma resource (type)", rel)
			}
		case ".env":
			config := strings.TrimSuffix(path, ".env") + ".yaml"
			if _, err := os.Stat(config); err != nil {
				t.Errorf("%s has no config next to it: %v", rel, err)
				return nil
			}
			env, vars := readEnvFile(t, path)
			cases = append(cases, exampleCase{name: rel, config: config, env: env, envVars: vars})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no examples found under " + examplesDir)
	}
	return cases
}

// assertKnownVariables fails on a ZONEPROXY_ variable that names no flag:
// the agent would ignore it without a word.
func assertKnownVariables(t *testing.T, ex exampleCase) {
	t.Helper()
	if len(ex.envVars) == 0 {
		return
	}
	_, help, _ := runCommand(t, nil, "run", "--help")
	for k := range ex.envVars {
		flag := "--" + envKey(k) + " "
		if envKey(k) == "config" || !strings.Contains(help, flag) {
			t.Errorf("%s: %s is not a setting: no %sin `zoneproxy run --help`", ex.name, k, flag)
		}
	}
}

// envKey turns ZONEPROXY_DRAIN_TIME into drain-time.
func envKey(v string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(v, "ZONEPROXY_"), "_", "-"))
}

// exampleSettings is the example's effective value for each key: the
// YAML file, overridden by its .env variables.
func exampleSettings(t *testing.T, ex exampleCase) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range readYAMLMap(t, ex.config) {
		out[k] = fmt.Sprint(v)
	}
	for k, v := range ex.envVars {
		out[envKey(k)] = v
	}
	return out
}

// exampleLabels are the extra labels the example sets, from ZONEPROXY_LABEL
// ("k=v,k2=v2") or else the file's label: list or map.
func exampleLabels(t *testing.T, ex exampleCase) map[string]string {
	t.Helper()
	out := map[string]string{}
	var pairs []string
	if v, ok := ex.envVars["ZONEPROXY_LABEL"]; ok {
		pairs = strings.Split(v, ",")
	} else {
		switch l := readYAMLMap(t, ex.config)["label"].(type) {
		case nil:
		case []any:
			for _, p := range l {
				pairs = append(pairs, fmt.Sprint(p))
			}
		case map[string]any:
			for k, v := range l {
				out[k] = fmt.Sprint(v)
			}
		default:
			t.Fatalf("%s: label is %T", ex.config, l)
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			t.Fatalf("%s: label %q is not key=value", ex.name, p)
		}
		out[k] = v
	}
	return out
}

func readYAMLMap(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// readEnvFile reads KEY=value lines the way systemd's EnvironmentFile= does
// for the simple form the examples use (no quotes, no continuation lines).
func readEnvFile(t *testing.T, path string) ([]string, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "ZONEPROXY_") || strings.ContainsAny(v, `"'\ `) {
			t.Fatalf("%s:%d: want an unquoted ZONEPROXY_<FLAG>=value line, got %q", path, n, line)
		}
		env = append(env, k+"="+v)
		vars[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env, vars
}

// runCommand runs zoneproxy to completion with stdout and stderr apart.
func runCommand(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bins.Zoneproxy, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
	case <-time.After(promptly):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("zoneproxy %s did not finish", strings.Join(args, " "))
	}
	return code, out.String(), errOut.String()
}

func assertJSONLines(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON although the example sets log-format json: %s", line)
			return
		}
	}
}

// The MeshZoneAddress example is exactly what the command in its own
// comment prints, so the file and the product cannot drift apart.
func TestExampleMeshZoneAddressIsWhatItsCommentRenders(t *testing.T) {
	path := filepath.Join(examplesDir, "ingress-advertised", "meshzoneaddress.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var comment, body []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if len(body) == 0 && strings.HasPrefix(line, "#") {
			comment = append(comment, line)
		} else {
			body = append(body, line)
		}
	}

	// The command: from "zoneproxy render meshzoneaddress" through its
	// backslash-continued lines.
	var words []string
	for i, in := 0, false; i < len(comment); i++ {
		line := strings.TrimSpace(strings.TrimPrefix(comment[i], "#"))
		if !in && !strings.HasPrefix(line, "zoneproxy render meshzoneaddress") {
			continue
		}
		in = true
		cont := strings.HasSuffix(line, `\`)
		words = append(words, strings.Fields(strings.TrimSuffix(line, `\`))...)
		if !cont {
			break
		}
	}
	if len(words) < 3 {
		t.Fatalf("%s: no `zoneproxy render meshzoneaddress` command in the comment", path)
	}
	args := slices.Clone(words[1:])
	// The comment names the installed config; use the example itself.
	i := slices.Index(args, "--config")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("%s: the command has no --config", path)
	}
	args[i+1] = filepath.Join(filepath.Dir(path), filepath.Base(args[i+1]))
	// The token file only has to exist and parse: stand in for the one on the VM.
	args = append(args, "--dataplane-token-file", unboundTokenFile(t))

	code, out, errOut := runCommand(t, nil, args...)
	if code != 0 {
		t.Fatalf("zoneproxy %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	if want := strings.Join(body, ""); out != want {
		t.Fatalf("%s differs from what its command prints:\n--- file\n%s--- zoneproxy %s\n%s",
			path, want, strings.Join(args, " "), out)
	}
}

// unboundTokenFile writes a JWT-shaped token bound to no mesh, name or
// workload, which the agent's local checks accept.
func unboundTokenFile(t *testing.T) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	tok := enc([]byte(`{"alg":"RS256","kid":"1","typ":"JWT"}`)) + "." + enc([]byte(`{}`)) + ".c2ln"
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
