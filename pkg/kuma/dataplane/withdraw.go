package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// StateNotReady is a listener's state that keeps kuma-cp from handing a
// zone egress to sidecars (resolveZoneEgresses takes Ready ones only).
const StateNotReady = "NotReady"

// WithEgressNotReady returns resource, a Dataplane as the control plane
// keeps it in Envoy's node metadata (JSON or YAML), with every ZoneEgress
// listener's state NotReady, as JSON. Everything else is left as it is.
func WithEgressNotReady(resource string) (string, error) {
	var dp map[string]any
	if err := yaml.Unmarshal([]byte(resource), &dp); err != nil {
		return "", fmt.Errorf("the Dataplane in the node metadata cannot be read: %w", err)
	}
	networking, _ := dp["networking"].(map[string]any)
	listeners, _ := networking["listeners"].([]any)
	marked := 0
	for _, l := range listeners {
		if l, ok := l.(map[string]any); ok && l["type"] == TypeZoneEgress {
			l["state"] = StateNotReady
			marked++
		}
	}
	if marked == 0 {
		return "", errors.New("the Dataplane in the node metadata has no ZoneEgress listener")
	}
	out, err := json.Marshal(dp)
	if err != nil {
		return "", err
	}
	return string(out), nil
}
