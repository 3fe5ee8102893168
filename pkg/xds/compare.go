package xds

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/zoneproxy/zoneproxy/pkg/xds/bootstraprewrite"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// Rewrite is what Start gives Envoy for doc, the control plane's
// bootstrap, with the relay on socketPath: the bootstrap a new Envoy would
// run with, and where the relay would go for it.
func Rewrite(doc []byte, socketPath string) ([]byte, cpdial.Target, error) {
	res, err := bootstraprewrite.Rewrite(doc, socketPath)
	if err != nil {
		return nil, cpdial.Target{}, err
	}
	return res.JSON, res.Upstream, nil
}

// BootstrapChanges names the top-level sections in which two bootstraps
// differ (node, layeredRuntime, …), nil when they are the same. The
// agent's own build in the node's metadata (version.kumaDp) does not
// count: kuma-cp shows it, Envoy does not read it, and an upgrade of the
// agent alone must not replace Envoy.
func BootstrapChanges(running, next []byte) ([]string, error) {
	var a, b map[string]any
	if err := yaml.Unmarshal(running, &a); err != nil {
		return nil, fmt.Errorf("the running Envoy's bootstrap: %w", err)
	}
	if err := yaml.Unmarshal(next, &b); err != nil {
		return nil, fmt.Errorf("the new bootstrap: %w", err)
	}
	dropAgentBuild(a)
	dropAgentBuild(b)
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if !reflect.DeepEqual(a[k], b[k]) {
			changed = append(changed, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			changed = append(changed, k)
		}
	}
	return changed, nil
}

// dropAgentBuild removes node.metadata.version.kumaDp.
func dropAgentBuild(doc map[string]any) {
	node, _ := doc["node"].(map[string]any)
	md, _ := node["metadata"].(map[string]any)
	if v, ok := md["version"].(map[string]any); ok {
		delete(v, "kumaDp")
	}
}
