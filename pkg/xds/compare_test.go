package xds

import (
	"slices"
	"testing"
)

func TestBootstrapChanges(t *testing.T) {
	agentBuild := [][]string{{"node", "metadata", "version", "kumaDp"}, {"node", "metadata", "dynamicMetadata", "version.dependencies.zoneproxy"}, {"no", "such", "member"}}
	const running = `{"node":{"id":"default.zp","metadata":{"dynamicMetadata":{"version.dependencies.zoneproxy":"1.0.0"},"version":{"kumaDp":{"version":"1.0.0"},"envoy":{"version":"1.39.0"}}}},
		"layeredRuntime":{"layers":[{"name":"kuma","staticLayer":{"re2.max_program_size.warn_level":1000}}]},"admin":{"address":{"pipe":{"path":"/w/a.sock"}}}}`
	for _, tc := range []struct {
		name, next string
		want       []string
	}{
		{"the same, keys in another order", `{"admin":{"address":{"pipe":{"path":"/w/a.sock"}}},"layeredRuntime":{"layers":[{"staticLayer":{"re2.max_program_size.warn_level":1000},"name":"kuma"}]},
			"node":{"metadata":{"version":{"envoy":{"version":"1.39.0"},"kumaDp":{"version":"1.0.0"}}},"id":"default.zp"}}`, nil},
		{"only the agent's build: an agent upgrade keeps Envoy", `{"node":{"id":"default.zp","metadata":{"dynamicMetadata":{"version.dependencies.zoneproxy":"1.1.0"},"version":{"kumaDp":{"version":"1.1.0"},"envoy":{"version":"1.39.0"}}}},
			"layeredRuntime":{"layers":[{"name":"kuma","staticLayer":{"re2.max_program_size.warn_level":1000}}]},"admin":{"address":{"pipe":{"path":"/w/a.sock"}}}}`, nil},
		{"a runtime value, as a kuma-cp upgrade changes its template", `{"node":{"id":"default.zp","metadata":{"version":{"kumaDp":{"version":"1.0.0"},"envoy":{"version":"1.39.0"}}}},
			"layeredRuntime":{"layers":[{"name":"kuma","staticLayer":{"re2.max_program_size.warn_level":2000}}]},"admin":{"address":{"pipe":{"path":"/w/a.sock"}}}}`, []string{"layeredRuntime"}},
		{"Envoy's build in the node, and a new section", `{"node":{"id":"default.zp","metadata":{"version":{"kumaDp":{"version":"1.0.0"},"envoy":{"version":"1.40.0"}}}},
			"layeredRuntime":{"layers":[{"name":"kuma","staticLayer":{"re2.max_program_size.warn_level":1000}}]},"admin":{"address":{"pipe":{"path":"/w/a.sock"}}},"statsConfig":{}}`, []string{"node", "statsConfig"}},
		{"a section gone", `{"node":{"id":"default.zp","metadata":{"version":{"kumaDp":{"version":"1.0.0"},"envoy":{"version":"1.39.0"}}}},"admin":{"address":{"pipe":{"path":"/w/a.sock"}}}}`, []string{"layeredRuntime"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BootstrapChanges([]byte(running), []byte(tc.next), agentBuild...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changes %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := BootstrapChanges([]byte(running), []byte("{not json")); err == nil {
		t.Error("a broken new bootstrap compared without an error")
	}
}
