package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// Without --state-dir the agent keeps its last-known-good configuration
// under $XDG_STATE_HOME/zoneproxy/<name>, so the cache is on by default.
func TestStateDirDefaultsUnderXDGStateHome(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	args := zone.Args(p, "--name", "egress-default-state")
	i := slices.Index(args, "--state-dir")
	args = slices.Delete(args, i, i+2)
	state := harness.ShortTempDir(t)
	env := []string{"XDG_STATE_HOME=" + state, "STATE_DIRECTORY="}
	agent := harness.StartAgent(t, bins.Zoneproxy, env, args...)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	cache := filepath.Join(state, "zoneproxy", "egress-default-state", "xds", "xds-lkg")
	harness.Eventually(t, promptly, "the configuration cached at "+cache, func() bool {
		_, err := os.Stat(cache)
		return err == nil
	})
	if _, err := os.Stat(p.StateDir); !os.IsNotExist(err) {
		t.Fatalf("the harness's state dir %s was used: %v", p.StateDir, err)
	}
}
