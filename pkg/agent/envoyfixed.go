package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// EnvoyFixed is what the running Envoy was started with, by setting: the
// proxy's identity and Dataplane (in Envoy's bootstrap), where its xDS
// goes, its work dir, binary and command line. A reload keeps Envoy, so a
// new configuration that changes any of it is refused: a restart applies
// it. The rest (log levels, the token file, drain times, the agent's own
// listeners, …) a reload applies.
func EnvoyFixed(cfg *config.Config) map[string]string {
	labels := make([]string, 0, len(cfg.Labels))
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		labels = append(labels, k+"="+cfg.Labels[k])
	}
	return map[string]string{
		"mesh": cfg.Mesh, "role": string(cfg.Role), "name": cfg.Name, "workload": cfg.Workload,
		"label": strings.Join(labels, ","), "address": cfg.Address,
		"ingress-port": fmt.Sprint(cfg.IngressPort), "egress-port": fmt.Sprint(cfg.EgressPort), "admin-port": fmt.Sprint(cfg.AdminPort),
		"cp-address": cfg.CPAddress, "xds-relay": fmt.Sprint(cfg.XDSRelay), "work-dir": absPath(cfg.WorkDir),
		"envoy-binary": cfg.EnvoyBinary, "envoy-arg": strings.Join(cfg.EnvoyArgs, " "), "concurrency": fmt.Sprint(cfg.Concurrency),
		"envoy-log-level": cfg.EnvoyLogLevel, "envoy-component-log-level": cfg.EnvoyComponentLogLevel,
	}
}

// envoyFixedChanges names the settings of EnvoyFixed that differ.
func envoyFixedChanges(running, next map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(running)) {
		if next[k] != running[k] {
			out = append(out, "--"+k)
		}
	}
	return out
}
