package agent

import (
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// checkNewProgram runs the new binary with this program's arguments and
// environment and --handover-check (upgrade.CheckProgram), and judges its
// answer: with Envoy running, a configuration that changes what the
// proxy is needs a restart.
func (a *Agent) checkNewProgram() error {
	c, err := upgrade.CheckProgram(a.rl.exe, a.rl.args)
	if err != nil {
		return err
	}
	var identity func(next map[string]string) []string
	if a.sup.Now() != nil { // else the new program starts over on the new configuration
		identity = func(next map[string]string) []string { return identityChanges(EnvoyFixed(a.cfg), next) }
	}
	return c.Verdict(identity)
}
