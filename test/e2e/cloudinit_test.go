package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// cloudInitFile is the example user-data; `make cloud-init-test` checks it
// against cloud-init's own schema.
const cloudInitFile = examplesDir + "/cloud-init/user-data.yaml"

type userData struct {
	WriteFiles []struct {
		Path, Permissions, Content string
	} `yaml:"write_files"`
	Runcmd [][]string `yaml:"runcmd"`
}

var (
	installLine   = regexp.MustCompile(`(?m)^\s*install (.*) (\S+) (/\S+)$`)
	zoneproxyLine = regexp.MustCompile(`(?m)\bzoneproxy ([a-z]+(?: [^|&;\n]*)?)`)
	enableLine    = regexp.MustCompile(`systemctl enable --now zoneproxy@(\S+)`)
)

// The cloud-init example does what it says with the CLI it ships with:
// the config it writes is one zoneproxy accepts, each zoneproxy command and
// flag it runs exists, every file the config names is installed where the
// config says, the token for the service user alone, and the unit it starts
// is the instance whose config it wrote.
func TestCloudInitUserData(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(cloudInitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), "#cloud-config\n") {
		t.Fatal("user-data must start with #cloud-config, or cloud-init ignores it")
	}
	var ud userData
	if err := yaml.Unmarshal(raw, &ud); err != nil {
		t.Fatal(err)
	}
	written := map[string]string{} // path → content
	for _, f := range ud.WriteFiles {
		written[f.Path] = f.Content
	}
	var script strings.Builder
	for _, cmd := range ud.Runcmd {
		script.WriteString(strings.Join(cmd, " ") + "\n")
	}

	// install [options] <seed file> <destination>
	installed := map[string]string{} // destination → options
	dir := t.TempDir()
	var configs []string // where the written configs are, here
	for _, m := range installLine.FindAllStringSubmatch(script.String(), -1) {
		opts, src, dst := m[1], m[2], m[3]
		installed[dst] = opts
		content, ok := written[filepath.Join("/run/zoneproxy-seed", src)]
		if !ok && src != "envoy" { // Envoy is downloaded
			t.Errorf("install %s: no write_files entry for it", src)
		}
		if strings.HasPrefix(dst, "/etc/zoneproxy/") && strings.HasSuffix(dst, ".yaml") {
			local := filepath.Join(dir, filepath.Base(dst))
			if err := os.WriteFile(local, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			configs = append(configs, local)
		}
	}
	if len(configs) != 1 {
		t.Fatalf("want one instance config installed in /etc/zoneproxy, got %v", configs)
	}
	config := configs[0]
	if code, out, errOut := runCommand(t, nil, "render", "dataplane", "--config", config); code != 0 {
		t.Errorf("zoneproxy does not accept the config it writes: exit %d\n%s%s", code, out, errOut)
	}
	settings := readYAMLMap(t, config)
	for _, key := range []string{"ca-cert-file", "dataplane-token-file", "envoy-binary"} {
		path, _ := settings[key].(string)
		if _, ok := installed[path]; !ok {
			t.Errorf("%s: %s is not installed by runcmd", key, path)
		}
	}
	if tok, _ := settings["dataplane-token-file"].(string); !strings.Contains(installed[tok], "-o zoneproxy") || !strings.Contains(installed[tok], "-m 0600") {
		t.Errorf("the token is installed with %q, want it the service user's alone (-o zoneproxy -m 0600)", installed[tok])
	}

	m := enableLine.FindStringSubmatch(script.String())
	if m == nil {
		t.Fatal("runcmd starts no zoneproxy@ instance")
	}
	if want := "/etc/zoneproxy/" + m[1] + ".yaml"; installed[want] == "" {
		t.Errorf("starts zoneproxy@%s, whose config %s is not installed", m[1], want)
	}

	cmds := zoneproxyLine.FindAllStringSubmatch(script.String(), -1)
	ran := 0
	for _, c := range cmds {
		args := strings.Fields(c[1])
		switch args[0] {
		case "check", "run", "drain", "undrain", "render", "bootstrap", "version":
		default:
			continue // prose, e.g. "zoneproxy user"
		}
		ran++
		// --help after the flags: the binary parses them, an unknown one
		// exits 64, and nothing runs.
		code, out, errOut := runCommand(t, nil, append(args, "--help")...)
		if code != 0 {
			t.Errorf("zoneproxy %s: exit %d\n%s%s", c[1], code, out, errOut)
		}
		for i, a := range args {
			if a == "--config" && i+1 < len(args) && installed[args[i+1]] == "" {
				t.Errorf("zoneproxy %s: %s is not installed", c[1], args[i+1])
			}
		}
	}
	if ran == 0 {
		t.Error("runcmd runs no zoneproxy command (the check gate)")
	}
}
