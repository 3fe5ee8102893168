package harness

import (
	"os"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// KumaEnv names the kuma-cp release the zones of an e2e run model when a
// test leaves Options.Kuma empty: "2.14" or "3.0" (the default when unset).
// Not ZONEPROXY_…: the agents inherit the environment, and zoneproxy
// refuses a ZONEPROXY_ variable that is not one of its settings.
// `make test-e2e-kuma214` sets it to run the suite's core against 2.14.
const KumaEnv = "ZP_E2E_KUMA"

// KumaOfRun is the release this run's zones model by default.
func KumaOfRun() string {
	if k := os.Getenv(KumaEnv); k != "" {
		return k
	}
	return controlplane.Kuma30
}

// SkipOnKuma214 skips a test that pins kuma-cp 3.0's behaviour (delta on
// the wire, SotW refused) when the run models 2.14.
func SkipOnKuma214(t testing.TB, why string) {
	t.Helper()
	if KumaOfRun() == controlplane.Kuma214 {
		t.Skipf("pins kuma-cp 3.0 (%s=%s): %s", KumaEnv, controlplane.Kuma214, why)
	}
}
