package bootstraprewrite

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenSocket is the relay socket the golden bootstraps were rewritten for.
const goldenSocket = "/run/zoneproxy/zoneproxy-xds.sock"

// testdata/golden holds bootstraps of the test control plane (each role;
// admin on TCP and on a pipe; envoy_grpc, google_grpc with kuma-cp's
// reloadable tokens, no auth; an xDS host name) and a snake_case one, with
// what the untyped rewrite of the 2026-11 release wrote for each. Envoy
// must get the same bootstrap: the same JSON once keys are sorted and
// spelled camelCase, as Envoy reads either spelling.
func TestRewriteGivesEnvoyTheGoldenBootstraps(t *testing.T) {
	ins, err := filepath.Glob("testdata/golden/*.in.yaml")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no golden bootstraps: %v", err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			doc, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(in, ".in.yaml") + ".want.json")
			if err != nil {
				t.Fatal(err)
			}
			res, err := Rewrite(doc, goldenSocket)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := canonicalJSON(t, res.JSON), canonicalJSON(t, want); !bytes.Equal(got, want) {
				t.Errorf("Envoy would get another bootstrap:\n--- got\n%s\n--- want\n%s", got, want)
			}
		})
	}
}

// canonicalJSON sorts keys and spells them camelCase; numbers stay as
// written, so that 5 and "5" differ.
func canonicalJSON(t *testing.T, js []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(camelKeys(v), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func camelKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, c := range t {
			m[camel(k)] = camelKeys(c)
		}
		return m
	case []any:
		for i, c := range t {
			t[i] = camelKeys(c)
		}
	}
	return v
}

func camel(k string) string {
	parts := strings.Split(k, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
