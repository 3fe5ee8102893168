package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// An egress whose withdrawal failed during a drain serves again after the
// undrain: its new Envoy's stream reaches the control plane.
func TestUndrainAfterAWithdrawalThatFailedServesAgain(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault controlplane.Faults
		dereg time.Duration // kuma-cp's deregistration delay; 0: harness.FastLifecycle's
	}{
		// The withdrawal is refused at once.
		{name: "control plane refusing connections", fault: controlplane.Faults{RefuseConnections: true}},
		// The withdrawal's connection gets no TLS answer (3 s).
		{name: "control plane hanging", fault: controlplane.Faults{Hang: true}},
		// kuma-cp holds the old stream past the withdrawal's wait (15 s).
		{name: "control plane holding the stream too long", dereg: 20 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, DeregistrationDelay: tt.dereg})
			p := zone.NewProxy("payments", "egress")
			agent := zone.Start(p, nil, "--drain-time", maintenanceDrainTime.String(), "--drain-min", "1s")
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			dp := onlyDataplane(t, zone)
			node := dp.Mesh + "." + dp.Name

			zone.CP.SetFaults(tt.fault)
			if code, out := maintain(t, p, "drain"); code != 0 || !strings.Contains(out, "DRAINED") {
				t.Fatalf("zoneproxy drain: exit %d, want 0 with DRAINED\n%s\n%s", code, out, agent.Output())
			}
			agent.AwaitLog("cannot withdraw the zone egress", promptly)
			zone.CP.SetFaults(controlplane.Faults{})
			before := zone.CP.NodeStream(node)

			start := time.Now()
			if code, out := maintain(t, p, "undrain"); code != 0 || !strings.Contains(out, "READY") {
				t.Fatalf("zoneproxy undrain: exit %d, want 0 with READY\n%s\n%s", code, out, agent.Output())
			}
			harness.Eventually(t, promptly, "a new ADS stream to reach the control plane", func() bool {
				now := zone.CP.NodeStream(node)
				return now.Connected && now.Accepted > before.Accepted
			})
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			t.Logf("READY with a stream at the control plane %s after the undrain", time.Since(start).Round(100*time.Millisecond))
			// Connected once kuma-cp's first answer went down the new stream;
			// READY may come sooner, from the cache.
			harness.Eventually(t, promptly, "the upstream metric to say connected", func() bool {
				return strings.Contains(agentMetrics(t, p.Readiness), `zoneproxy_xds_upstream{state="connected"} 1`)
			})
		})
	}
}
