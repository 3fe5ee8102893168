package envoy

import (
	"os"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/host/sdnotify"
)

// ChildEnv is the agent's environment as Envoy (and `envoy --version`)
// gets it: without the agent's own settings, which may hold the token,
// and without systemd's notify, watchdog and socket-activation variables,
// so that a child can neither speak for the unit nor read the credential.
func ChildEnv() []string { return childEnv(os.Environ()) }

func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range sdnotify.ScrubEnv(env) {
		if !strings.HasPrefix(kv, "ZONEPROXY_") {
			out = append(out, kv)
		}
	}
	return out
}
