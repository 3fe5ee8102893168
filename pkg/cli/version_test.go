package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// `version -o json` has stable fields for scripts; `--version` is the same
// line as `version`.
func TestVersionOutputs(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = w
		var stderr bytes.Buffer
		code := Main(args, &stderr)
		os.Stdout = stdout
		w.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(r)
		return code, out.String(), stderr.String()
	}
	code, out, _ := run("version", "-o", "json")
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); code != 0 || err != nil {
		t.Fatalf("version -o json: exit %d, %v\n%s", code, err, out)
	}
	for _, k := range []string{"version", "commit", "buildDate", "kuma", "envoy"} {
		if s, _ := info[k].(string); s == "" {
			t.Errorf("version -o json lacks %q: %s", k, out)
		}
	}
	if supports, _ := info["supports"].([]any); len(supports) != len(version.Supported) {
		t.Errorf("version -o json names %v supported Kuma releases, want %d: %s", info["supports"], len(version.Supported), out)
	}
	if code, out, _ := run("--version"); code != 0 || strings.TrimSpace(out) != version.String() {
		t.Errorf("--version: exit %d %q, want %q", code, out, version.String())
	}
	if code, _, errOut := run("version", "-o", "yaml"); code != 64 || !strings.Contains(errOut, "use text or json") {
		t.Errorf("version -o yaml: exit %d %q", code, errOut)
	}
}
