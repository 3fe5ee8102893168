// Package e2e runs the real zoneproxy binary against the test control
// plane and the Envoy stand-in, as an operator would.
package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

var bins harness.Binaries

// promptly bounds what should happen at once. It is generous because
// another suite may share the cores: these tests check order and outcome;
// make bench measures how fast.
const promptly = 30 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zp-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// An agent without --state-dir keeps its cache under XDG_STATE_HOME:
	// never the user's own.
	os.Setenv("XDG_STATE_HOME", dir+"/state")
	bins, err = harness.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// readyEgress starts an egress for mesh "payments" (which exists) and
// waits until it is READY.
func readyEgress(t *testing.T, env []string, extra ...string) (*harness.Zone, harness.Proxy, *harness.Agent) {
	t.Helper()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, env, extra...)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	// A first start registers the egress Ready once Envoy has its listener
	// (egress_heldback_test.go): the proxy has settled once kuma-cp took it.
	agent.AwaitLog(egressRegisteredLog, promptly)
	return zone, p, agent
}
