package inplace

import (
	"maps"
	"slices"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// EnvoyFixed is what the running Envoy was started with, by setting: the
// settings a reload refuses (config.ReloadRestarts: the proxy's identity
// and Dataplane, in Envoy's bootstrap, where its xDS goes, its work dir)
// and its launch (config.ReloadHandsOver). A reload keeps Envoy, so a new
// configuration that changes the identity is refused: a restart applies
// it. A changed launch a reload applies through an Envoy handover, a new
// Envoy beside the old. The rest (the token file, drain times, the
// agent's own listeners, …) a reload applies in the agent.
func EnvoyFixed(cfg *config.Config) map[string]string {
	fixed := config.Texts(cfg, config.ReloadRestarts, config.ReloadHandsOver)
	fixed[string(config.KeyWorkDir)] = absPath(cfg.WorkDir)
	return fixed
}

// launchOf is how Envoy is launched: what a handover can change.
func launchOf(cfg *config.Config) map[string]string {
	return config.Texts(cfg, config.ReloadHandsOver)
}

// envoyFixedChanges names the settings of running that next sets otherwise.
func envoyFixedChanges(running, next map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(running)) {
		if next[k] != running[k] {
			out = append(out, config.Key(k).Flag())
		}
	}
	return out
}

// identityChanges are envoyFixedChanges but for the launch: what only a
// restart applies.
func identityChanges(running, next map[string]string) []string {
	return slices.DeleteFunc(envoyFixedChanges(running, next), func(flag string) bool {
		s, ok := config.Lookup(strings.TrimPrefix(flag, "--"))
		return ok && s.Reload == config.ReloadHandsOver
	})
}
