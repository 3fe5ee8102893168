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
// goes, its work dir, and its launch (launchSettings). A reload keeps
// Envoy, so a new configuration that changes the identity is refused: a
// restart applies it. A changed launch a reload applies through an Envoy
// handover, a new Envoy beside the old. The rest (the token file, drain
// times, the agent's own listeners, …) a reload applies in the agent.
func EnvoyFixed(cfg *config.Config) map[string]string {
	labels := make([]string, 0, len(cfg.Labels))
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		labels = append(labels, k+"="+cfg.Labels[k])
	}
	fixed := map[string]string{
		"mesh": cfg.Mesh, "role": string(cfg.Role), "name": cfg.Name, "workload": cfg.Workload,
		"label": strings.Join(labels, ","), "address": cfg.Address,
		"ingress-port": fmt.Sprint(cfg.IngressPort), "egress-port": fmt.Sprint(cfg.EgressPort), "admin-port": fmt.Sprint(cfg.AdminPort),
		"cp-address": cfg.CPAddress, "xds-relay": fmt.Sprint(cfg.XDSRelay), "work-dir": absPath(cfg.WorkDir),
	}
	maps.Copy(fixed, envoyLaunch(cfg))
	return fixed
}

// envoyLaunch is how Envoy is launched: what a handover can change.
func envoyLaunch(cfg *config.Config) map[string]string {
	return map[string]string{
		"envoy-binary": cfg.EnvoyBinary, "envoy-arg": strings.Join(cfg.EnvoyArgs, " "), "concurrency": fmt.Sprint(cfg.Concurrency),
		"envoy-log-level": cfg.EnvoyLogLevel, "envoy-component-log-level": cfg.EnvoyComponentLogLevel,
	}
}

// envoyFixedChanges names the settings of running that next sets otherwise.
func envoyFixedChanges(running, next map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(running)) {
		if next[k] != running[k] {
			out = append(out, "--"+k)
		}
	}
	return out
}

// identityChanges are envoyFixedChanges but for the launch: what only a
// restart applies.
func identityChanges(running, next map[string]string) []string {
	launch := envoyLaunch(&config.Config{})
	return slices.DeleteFunc(envoyFixedChanges(running, next), func(flag string) bool {
		_, ok := launch[strings.TrimPrefix(flag, "--")]
		return ok
	})
}
