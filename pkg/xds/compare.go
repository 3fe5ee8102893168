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
// fields at the paths in ignore do not count: the agent's own build,
// which kuma-cp shows and Envoy does not read, so that an upgrade of the
// agent alone does not replace Envoy.
func BootstrapChanges(running, next []byte, ignore ...[]string) ([]string, error) {
	var a, b map[string]any
	if err := yaml.Unmarshal(running, &a); err != nil {
		return nil, fmt.Errorf("the running Envoy's bootstrap: %w", err)
	}
	if err := yaml.Unmarshal(next, &b); err != nil {
		return nil, fmt.Errorf("the new bootstrap: %w", err)
	}
	for _, path := range ignore {
		deletePath(a, path)
		deletePath(b, path)
	}
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

// deletePath removes the member at path, if there is one, and the maps
// on the way that it leaves empty: a bootstrap without the agent's build
// is the same as one whose section held only that.
func deletePath(doc map[string]any, path []string) {
	if len(path) == 0 {
		return
	}
	k := path[0]
	if len(path) > 1 {
		next, ok := doc[k].(map[string]any)
		if !ok {
			return
		}
		deletePath(next, path[1:])
		if len(next) > 0 {
			return
		}
	}
	delete(doc, k)
}
