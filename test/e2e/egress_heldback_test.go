package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// egressRegisteredLog is what the agent says once kuma-cp took a first
// start's egress as Ready.
const egressRegisteredLog = "kuma-cp registered the zone egress Ready"

// A zone egress whose Envoy has no egress listener (kuma-cp sends none
// while the mesh has no MeshIdentity) is never handed to the sidecars: it
// registers the listener NotReady, and Ready only once Envoy has it. A
// sidecar following kuma-cp's egress set never has a connection refused,
// and is sent to the egress once it serves.
func TestAnEgressIsHandedToSidecarsOnlyOnceItServes(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	if err := zone.CP.WithholdZoneListeners("payments", "zp-egress-new", true); err != nil {
		t.Fatal(err)
	}
	car := startSidecar(zone)
	t.Cleanup(func() { car.finish() })
	agent := zone.Start(p, nil, "--name", "zp-egress-new")
	agent.AwaitLog("registered with its listener NotReady until Envoy has it", promptly)
	if zone.CP.Kuma() == "2.14" {
		// 2.14 sends no LDS at all while the listener is withheld.
		agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_CONTROL_PLANE", promptly)
		harness.Eventually(t, promptly, "/status to name the MeshIdentity kuma-cp waits for", func() bool {
			return strings.Contains(statusOf(t, p).Detail, "MeshIdentity")
		})
	} else {
		agent.AwaitReadiness(p.Readiness, 503, "NO_ZONE_LISTENER", promptly)
	}
	dp := onlyDataplane(t, zone)
	if len(dp.Listeners) != 1 || dp.Listeners[0].State != "NotReady" {
		t.Fatalf("kuma-cp registered listeners %+v, want the egress listener NotReady", dp.Listeners)
	}
	// An absence has no event to await: longer than the sidecars take to
	// hear of a registration. The timeline and the sidecar's refusals
	// below say whether the egress was handed out meanwhile.
	time.Sleep(2 * zone.CP.Timings().EgressPropagation)

	released := time.Now()
	if err := zone.CP.WithholdZoneListeners("payments", "zp-egress-new", false); err != nil {
		t.Fatal(err)
	}
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	agent.AwaitLog(egressRegisteredLog, promptly)
	harness.Eventually(t, promptly, "the egress handed out", func() bool { return len(zone.CP.ZoneEgresses("payments")) == 1 })
	from := car.total.Load()
	harness.Eventually(t, promptly, "sidecar traffic through the egress", func() bool { return car.total.Load() >= from+20 })
	refused, served := car.finish()
	if len(refused) > 0 || served[uint32(p.Egress)] == 0 {
		t.Fatalf("the sidecar was refused %d times (%v), served %v", len(refused), refused, served)
	}
	for _, ev := range zone.CP.ZoneEgressTimeline("payments") {
		if len(ev.Egresses) > 0 && ev.At.Before(released) {
			t.Errorf("kuma-cp handed out the egress at %s, before Envoy had its listener (%s)", ev.At, released)
		}
	}
	if st := statusOf(t, p); strings.Contains(st.Detail, "held back") {
		t.Errorf("once in the egress set, /status still says %q", st.Detail)
	}
}
