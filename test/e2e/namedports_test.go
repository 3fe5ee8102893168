package e2e

import (
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

const namedPortWarning = "kuma-cp 2.14 gives this ingress SNIs with MeshService port names"

// kuma-cp 2.14.3's ingress matches a MeshService port's name while its
// sidecars send the number: the agent warns, once per change of those
// SNIs, and not for a numbered port nor on Kuma 3.0.
func TestKuma214NamedMeshServicePortsAreWarnedAbout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kuma  string
		named bool
		want  int
	}{
		{controlplane.Kuma214, true, 1},
		{controlplane.Kuma214, false, 0},
		{controlplane.Kuma30, true, 0},
	} {
		t.Run(tc.kuma+map[bool]string{true: "-named", false: "-numbered"}[tc.named], func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, Kuma: tc.kuma})
			if err := zone.CP.SetMeshServicePortNamed("payments", tc.named); err != nil {
				t.Fatal(err)
			}
			p, agent := namedProxy(t, zone, "payments", "ingress", "zp-ingress")
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			// The listeners gone and back with the same names: no second warning.
			if err := zone.CP.WithholdZoneListeners("payments", "zp-ingress", true); err != nil {
				t.Fatal(err)
			}
			agent.AwaitReadiness(p.Readiness, 503, "NO_ZONE_LISTENER", promptly)
			if err := zone.CP.WithholdZoneListeners("payments", "zp-ingress", false); err != nil {
				t.Fatal(err)
			}
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			if tc.want > 0 {
				agent.AwaitLog(namedPortWarning, promptly)
			}
			if n := strings.Count(agent.Output(), namedPortWarning); n != tc.want {
				t.Fatalf("warned %d times, want %d\n%s", n, tc.want, agent.Output())
			}
		})
	}
}
