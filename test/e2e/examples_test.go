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
	"reflect"
	"regexp"
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
		// Examples of one name run side by side: a state dir each.
		"--state-dir", filepath.Join(zone.Dir, "state"),
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

	// render takes only the Dataplane's flags; the rest stays in the env and file.
	var renderArgs []string
	for i := 0; i+1 < len(overrides); i += 2 {
		switch overrides[i] {
		case "--config", "--address", "--admin-port", "--ingress-port", "--egress-port":
			renderArgs = append(renderArgs, overrides[i], overrides[i+1])
		}
	}
	code, out, errOut := runCommand(t, ex.env, append([]string{"render", "dataplane"}, renderArgs...)...)
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

// otherToolsExamples are examples/ folders for other tools' files: alert
// rules (make alerts-test, TestAlertRulesReadServedMetrics) and cloud-init
// user-data (TestCloudInitUserData), an Ansible role and playbook
// (make e2e-ansible).
var otherToolsExamples = map[string]bool{"prometheus": true, "cloud-init": true, "ansible": true}

// discoverExamples finds every zoneproxy config under examples/ and every
// .env file, which applies to the YAML file of the same name next to it.
// A YAML file that is neither a config nor a rendered Kuma resource fails
// the test, so a new example cannot be skipped by accident.
func discoverExamples(t *testing.T) []exampleCase {
	t.Helper()
	var cases []exampleCase
	err := filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && otherToolsExamples[d.Name()] {
			return filepath.SkipDir // checked by their own tests
		}
		rel, _ := filepath.Rel(examplesDir, path)
		if err != nil || d.IsDir() {
			return err
		}
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

// assertKnownVariables fails on a ZONEPROXY_ variable that names no flag
// of run: the agent refuses it too, but this names the example file.
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
	env := []string{"ZONEPROXY_DATAPLANE_TOKEN_FILE=" + unboundTokenFile(t)}

	code, out, errOut := runCommand(t, env, args...)
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

// What the examples' comments say, checked against the binary: the
// commands in each config's header, the keys, the ports, and every claim
// payments-egress.env makes about variables.

// docExamples is where the packages install examples/.
const docExamples = "/usr/share/doc/zoneproxy/examples/"

// Each config's header: it is copied from the package to the file its
// instance reads, its token is issued for the mesh and workload the config
// uses and written where the config reads it, and its keys are flags.
func TestExampleHeadersMatchTheirConfig(t *testing.T) {
	_, help, _ := runCommand(t, nil, "run", "--help")
	for _, ex := range discoverExamples(t) {
		if ex.env != nil {
			continue
		}
		t.Run(ex.name, func(t *testing.T) {
			comment := headerComment(t, ex.config)
			settings := exampleSettings(t, ex)
			instance := strings.TrimSuffix(filepath.Base(ex.config), ".yaml")
			workload := settings["workload"]
			if workload == "" {
				workload = "zone-proxy-" + settings["mesh"] + "-" + settings["role"]
			}
			token := settings["dataplane-token-file"]
			for _, want := range []string{
				"zoneproxy@" + instance + ".service",
				"cp " + docExamples + ex.name + " /etc/zoneproxy/\n",
				"kumactl generate dataplane-token --mesh " + settings["mesh"] + " ",
				"--workload " + workload + " > " + token + ")",
				"chown zoneproxy: " + token + "\n",
				"systemctl enable --now zoneproxy@" + instance + "\n",
			} {
				if !strings.Contains(comment, want) {
					t.Errorf("the header does not say %q:\n%s", want, comment)
				}
			}
			for key := range readYAMLMap(t, ex.config) {
				if !strings.Contains(help, "--"+key+" ") {
					t.Errorf("key %s is not a flag of `zoneproxy run --help`", key)
				}
			}
		})
	}
}

// headerComment is the file's leading comment, without the "# ".
func headerComment(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		out.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n")
	}
	return out.String()
}

// "Ports must differ between zone proxies on the same host", and the
// README's "any of them can share a host": no two instances (configs named
// alike are variants of one instance) use the same port.
func TestExamplePortsLetThemShareAHost(t *testing.T) {
	defaults := runFlagDefaults(t)
	owner := map[string]string{} // port -> instance:key
	for _, ex := range discoverExamples(t) {
		if ex.env != nil {
			continue
		}
		settings := exampleSettings(t, ex)
		instance := strings.TrimSuffix(filepath.Base(ex.config), ".yaml")
		keys := []string{"admin-port", "readiness-port"}
		if settings["role"] != "egress" {
			keys = append(keys, "ingress-port")
		}
		if settings["role"] != "ingress" {
			keys = append(keys, "egress-port")
		}
		for _, key := range keys {
			port, ok := settings[key]
			if !ok {
				port = defaults[key]
			}
			if prev, taken := owner[port]; taken && !strings.HasPrefix(prev, instance+":") {
				t.Errorf("%s: %s %s is also %s", ex.name, key, port, prev)
			}
			owner[port] = instance + ":" + key
		}
	}
}

// runFlagDefaults maps each flag of `zoneproxy run --help` to its default.
func runFlagDefaults(t *testing.T) map[string]string {
	t.Helper()
	_, help, _ := runCommand(t, nil, "run", "--help")
	re := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+) .*\(default "?([^")]*)"?\)`)
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(help, -1) {
		out[m[1]] = m[2]
	}
	if out["admin-port"] == "" {
		t.Fatalf("no defaults found in `zoneproxy run --help`:\n%s", help)
	}
	return out
}

// Every claim payments-egress.env makes in its comments.
func TestExampleEnvFileClaims(t *testing.T) {
	envPath := filepath.Join(examplesDir, "payments-egress.env")
	config := filepath.Join(examplesDir, "payments-egress.yaml")
	env, vars := readEnvFile(t, envPath)
	comment := strings.Join(commentLines(t, envPath), "\n")
	file := readYAMLMap(t, config)

	t.Run("a variable wins over the YAML file, a flag over both", func(t *testing.T) {
		if got := renderDataplane(t, []string{"ZONEPROXY_ADMIN_PORT=9950"}, "--config", config).Networking.Admin.Port; got != 9950 {
			t.Errorf("ZONEPROXY_ADMIN_PORT=9950 over the file's admin-port %v: admin port %d", file["admin-port"], got)
		}
		if got := renderDataplane(t, []string{"ZONEPROXY_ADMIN_PORT=9950"}, "--config", config, "--admin-port", "9960").Networking.Admin.Port; got != 9960 {
			t.Errorf("--admin-port 9960 over ZONEPROXY_ADMIN_PORT=9950: admin port %d", got)
		}
	})

	t.Run("a misspelt variable is an error naming the right one", func(t *testing.T) {
		if !strings.Contains(comment, "A misspelt variable is an error that names the one meant") {
			t.Errorf("the comment does not say what this checks:\n%s", comment)
		}
		code, _, errOut := runCommand(t, append(slices.Clone(env), "ZONEPROXY_DRAIN_TIMEOUT=45s"), "run", "--config", config)
		if code != 78 || !strings.Contains(errOut, "ZONEPROXY_DRAIN_TIMEOUT") || !strings.Contains(errOut, "did you mean ZONEPROXY_DRAIN_TIME?") {
			t.Errorf("run with ZONEPROXY_DRAIN_TIMEOUT: exit %d (want 78, which systemd does not restart), stderr:\n%s", code, errOut)
		}
	})

	// Cleared means: as if the file did not set the key at all.
	t.Run("an empty value clears the YAML key", func(t *testing.T) {
		if !strings.Contains(comment, "An empty value clears the YAML key, as if the file did not set it") {
			t.Errorf("the comment does not say what this checks:\n%s", comment)
		}
		for _, tc := range []struct{ config, key string }{
			{"ingress-advertised/payments-ingress.yaml", "address"},
			{"ingress-advertised/payments-ingress.yaml", "name"},
			{"backend-combined.yaml", "label"},
		} {
			path := filepath.Join(examplesDir, tc.config)
			variable := "ZONEPROXY_" + strings.ToUpper(strings.ReplaceAll(tc.key, "-", "_"))
			set := renderDataplane(t, nil, "--config", path)
			cleared := renderDataplane(t, []string{variable + "="}, "--config", path)
			unset := renderDataplane(t, nil, "--config", configWithout(t, path, tc.key))
			if !reflect.DeepEqual(cleared, unset) {
				t.Errorf("%s= with %s: got %+v, want %+v (the file without %s:)", variable, tc.config, cleared, unset, tc.key)
			}
			if reflect.DeepEqual(cleared, set) {
				t.Errorf("%s= with %s changed nothing: the file's %s: still applies", variable, tc.config, tc.key)
			}
		}
	})

	t.Run("ZONEPROXY_LABEL replaces the file's labels", func(t *testing.T) {
		path := filepath.Join(examplesDir, "backend-combined.yaml")
		labels := renderDataplane(t, []string{"ZONEPROXY_LABEL=" + vars["ZONEPROXY_LABEL"]}, "--config", path).Labels
		for k, v := range exampleLabels(t, exampleCase{name: "backend-combined.yaml", config: path}) {
			if got, ok := labels[k]; ok && got == v {
				t.Errorf("the file's label %s=%s survived ZONEPROXY_LABEL: %v", k, v, labels)
			}
		}
	})

	t.Run("what the file completes and overrides", func(t *testing.T) {
		for _, v := range []string{"ZONEPROXY_ADDRESS", "ZONEPROXY_CA_CERT_FILE", "ZONEPROXY_LABEL"} {
			if _, ok := vars[v]; !ok {
				t.Errorf("%s is not in the file", v)
			}
			if val, ok := file[envKey(v)]; ok {
				t.Errorf("the comment says the YAML file leaves %s unset, but it sets %v", envKey(v), val)
			}
		}
		if want := fmt.Sprintf("Overrides the YAML file's drain-time: %v.", file["drain-time"]); !strings.Contains(comment, want) {
			t.Errorf("the YAML file's drain-time is %v: the comment should say %q", file["drain-time"], want)
		}
		if want := fmt.Sprintf("Overrides the default (%s)", runFlagDefaults(t)["log-format"]); !strings.Contains(comment, want) {
			t.Errorf("the comment should say %q", want)
		}
	})

	// The preview command in the last comment, run as written with the
	// example's paths: sh reads the file as systemd does.
	t.Run("the preview command", func(t *testing.T) {
		var cmd string
		for _, line := range commentLines(t, envPath) {
			if _, after, ok := strings.Cut(line, "sudo sh -c '"); ok {
				cmd = strings.TrimSuffix(after, "'")
			}
		}
		if cmd == "" {
			t.Fatal("no `sudo sh -c '...'` preview command in the comments")
		}
		cmd = strings.ReplaceAll(cmd, "/etc/zoneproxy/payments-egress.env", envPath)
		cmd = strings.ReplaceAll(cmd, "/etc/zoneproxy/payments-egress.yaml", config)
		cmd = strings.ReplaceAll(cmd, "exec zoneproxy ", "exec "+bins.Zoneproxy+" ")
		out, err := exec.Command("sh", "-c", cmd).Output()
		if err != nil {
			t.Fatalf("sh -c %q: %v", cmd, err)
		}
		var dp renderedDataplane
		if err := yaml.Unmarshal(out, &dp); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if dp.Networking.Address != vars["ZONEPROXY_ADDRESS"] || dp.Labels["tier"] != "edge" {
			t.Errorf("the preview does not show the file's address and labels: %+v", dp)
		}
	})
}

// "Tokens are per mesh: this proxy needs its own, for mesh billing."
func TestExampleTokensArePerMesh(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	tok := enc([]byte(`{"alg":"RS256","kid":"1","typ":"JWT"}`)) + "." + enc([]byte(`{"Mesh":"payments"}`)) + ".c2ln"
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCommand(t, nil, "run", "--config", filepath.Join(examplesDir, "two-meshes", "billing-egress.yaml"),
		"--dataplane-token-file", path)
	if code != 78 || !strings.Contains(errOut, `token is for mesh "payments", but --mesh is "billing"`) {
		t.Errorf("billing-egress with a payments token: exit %d, want 78 naming the mesh; stderr:\n%s", code, errOut)
	}
}

type renderedDataplane struct {
	Name       string            `yaml:"name"`
	Labels     map[string]string `yaml:"labels"`
	Networking struct {
		Address string `yaml:"address"`
		Admin   struct {
			Port int `yaml:"port"`
		} `yaml:"admin"`
	} `yaml:"networking"`
}

func renderDataplane(t *testing.T, env []string, args ...string) renderedDataplane {
	t.Helper()
	code, out, errOut := runCommand(t, env, append([]string{"render", "dataplane"}, args...)...)
	if code != 0 {
		t.Fatalf("zoneproxy render dataplane %s (env %v): exit %d\n%s", strings.Join(args, " "), env, code, errOut)
	}
	var dp renderedDataplane
	if err := yaml.Unmarshal([]byte(out), &dp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return dp
}

// configWithout writes a copy of the config without key.
func configWithout(t *testing.T, path, key string) string {
	t.Helper()
	m := readYAMLMap(t, path)
	if _, ok := m[key]; !ok {
		t.Fatalf("%s does not set %s", path, key)
	}
	delete(m, key)
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// commentLines are a file's comment lines, without the "# ".
func commentLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			out = append(out, strings.TrimPrefix(rest, " "))
		}
	}
	return out
}
