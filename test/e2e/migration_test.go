package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// The migration from legacy zone proxies exists only on kuma-cp 2.14
// (3.0 has no legacy ones): these tests run against its model whatever
// ZP_E2E_KUMA says.

// migrationZone is a 2.14 zone whose mesh "payments" has a legacy
// ZoneIngress (for LocalZone, as seen from another zone), a legacy
// ZoneEgress unless legacyEgress is false (a MeshIdentity would freeze
// the sidecar with it), each served by a stand-in, a MeshService with a
// numbered port (the guide's advice for 2.14), and a MeshIdentity if
// meshIdentity.
func migrationZone(t *testing.T, meshIdentity, legacyEgress bool) (*harness.Zone, *legacyProxy, *legacyProxy) {
	t.Helper()
	zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, Kuma: controlplane.Kuma214})
	cp := zone.CP
	in := startLegacyProxy(t, controlplane.LegacySNI("payments", "ingress"))
	out := startLegacyProxy(t, controlplane.LegacySNI("payments", "egress"))
	inAddr, inPort := in.addr()
	outAddr, outPort := out.addr()
	for _, err := range []error{
		cp.SetMeshServicePortNamed("payments", false),
		cp.SetLegacyZoneIngress("legacy-ingress", controlplane.LegacyZoneIngress{Zone: controlplane.LocalZone, Address: inAddr, Port: inPort}),
		cp.SetLegacyZoneEgress("legacy-egress", controlplane.LegacyZoneEgress{Address: outAddr, Port: outPort}),
		cp.SetMeshIdentity("payments", meshIdentity),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !legacyEgress {
		cp.DeleteLegacyZoneEgress("legacy-egress")
	}
	return zone, in, out
}

func setMZA(t *testing.T, zone *harness.Zone, p harness.Proxy) {
	t.Helper()
	mza := controlplane.MeshZoneAddress{Zone: controlplane.LocalZone, Address: "127.0.0.1", Port: uint32(p.Ingress)}
	if err := zone.CP.SetMeshZoneAddress("payments", "zp-ingress", mza); err != nil {
		t.Fatal(err)
	}
}

// readyZoneProxy starts a zone proxy of mesh payments named name and
// waits until it is READY.
func readyZoneProxy(t *testing.T, zone *harness.Zone, role, name string) (harness.Proxy, *harness.Agent) {
	t.Helper()
	p, agent := namedProxy(t, zone, "payments", role, name)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	return p, agent
}

func stopAgent(t *testing.T, a *harness.Agent) {
	t.Helper()
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(promptly); code != 0 {
		t.Fatalf("zoneproxy exited %d on SIGTERM\n%s", code, a.Output())
	}
}

// The guide's order (baseline; MeshIdentity and the zoneproxy egress;
// the zoneproxy ingress until READY; the MeshZoneAddress; the legacy
// proxies retired) never leaves a sidecar without a usable endpoint, for
// the external service nor for the remote zone's service.
func TestKuma214MigrationInTheGuidesOrderKeepsEverySampleUsable(t *testing.T) {
	t.Parallel()
	zone, legacyIn, legacyOut := migrationZone(t, false, true)
	cp := zone.CP
	car := startMigrationSidecar(t, cp, "payments", toExternal, toRemote)

	// 1. The baseline: the legacy proxies serve.
	car.await(t, toExternal, controlplane.ViaLegacyEgress, 3)
	car.await(t, toRemote, controlplane.ViaLegacyIngress, 3)
	from := car.mark()

	// 2. MeshIdentity, and the zoneproxy egress right after it.
	if err := cp.SetMeshIdentity("payments", true); err != nil {
		t.Fatal(err)
	}
	readyZoneProxy(t, zone, "egress", "zp-egress")
	car.await(t, toExternal, controlplane.ViaZoneproxyEgress, 3)

	// 3. The zoneproxy ingress, until READY: nothing is sent to it yet.
	ingress, _ := readyZoneProxy(t, zone, "ingress", "zp-ingress")
	car.await(t, toRemote, controlplane.ViaLegacyIngress, 3)

	// 4. The MeshZoneAddress last.
	setMZA(t, zone, ingress)
	car.await(t, toRemote, controlplane.ViaMeshZoneAddress, 3)

	// 5. The legacy proxies stopped, then their resources deleted.
	legacyIn.stop()
	legacyOut.stop()
	cp.DeleteLegacyZoneIngress("legacy-ingress")
	cp.DeleteLegacyZoneEgress("legacy-egress")
	car.await(t, toExternal, controlplane.ViaZoneproxyEgress, 3)
	car.await(t, toRemote, controlplane.ViaMeshZoneAddress, 3)

	car.allUsable(t, from, "the migration")
}

// Rolling the ingress back: stopping the zoneproxy ingress first leaves
// the MeshZoneAddress, so the other zone keeps the dead address (the
// guide's warning); deleting the MZA first, then stopping the ingress,
// leaves no sample without a usable endpoint.
func TestKuma214IngressRollbackDeletesTheMZAFirst(t *testing.T) {
	t.Parallel()
	zone, _, _ := migrationZone(t, true, false)
	cp := zone.CP
	car := startMigrationSidecar(t, cp, "payments", toRemote)
	ingress, agent := readyZoneProxy(t, zone, "ingress", "zp-ingress")
	setMZA(t, zone, ingress)
	car.await(t, toRemote, controlplane.ViaMeshZoneAddress, 3)

	// The wrong order: the ingress stopped, the MZA left in place.
	from := car.mark()
	stopAgent(t, agent)
	harness.Eventually(t, promptly, "the sidecar refused at the stopped ingress", func() bool {
		return car.count(from, toRemote, controlplane.ViaMeshZoneAddress, false) >= 3
	})
	// An absence has no event to await: several propagation lags, then
	// the sidecar must still be sent to the dead address.
	time.Sleep(3 * cp.Timings().EgressPropagation)
	if v := cp.SidecarView("payments", controlplane.LocalZone); len(v.Ingress) != 1 || v.Ingress[0].Via != controlplane.ViaMeshZoneAddress {
		t.Fatalf("with the MZA left, the sidecar is sent %+v, want the stopped ingress's MZA", v.Ingress)
	}
	cp.DeleteMeshZoneAddress("payments", "zp-ingress")
	car.await(t, toRemote, controlplane.ViaLegacyIngress, 3)

	// The right order, from a serving ingress again: the MZA, then the ingress.
	ingress, agent = readyZoneProxy(t, zone, "ingress", "zp-ingress")
	setMZA(t, zone, ingress)
	car.await(t, toRemote, controlplane.ViaMeshZoneAddress, 3)
	from = car.mark()
	cp.DeleteMeshZoneAddress("payments", "zp-ingress")
	car.await(t, toRemote, controlplane.ViaLegacyIngress, 3)
	stopAgent(t, agent)
	car.await(t, toRemote, controlplane.ViaLegacyIngress, 3)
	car.allUsable(t, from, "rolling back MZA first")
}

// Once the mesh has a MeshIdentity there is no way back to the legacy
// egress: a stopped zoneproxy egress stays the sidecars' egress while the
// legacy ZoneEgress exists (kuma-cp 2.14.3 freezes them).
func TestKuma214NoWayBackToTheLegacyEgress(t *testing.T) {
	t.Parallel()
	zone, _, _ := migrationZone(t, true, true)
	cp := zone.CP
	car := startMigrationSidecar(t, cp, "payments", toExternal)
	_, agent := readyZoneProxy(t, zone, "egress", "zp-egress")
	car.await(t, toExternal, controlplane.ViaZoneproxyEgress, 3)
	from := car.mark()
	stopAgent(t, agent)
	harness.Eventually(t, promptly, "the sidecar refused at the stopped egress", func() bool {
		return car.count(from, toExternal, controlplane.ViaZoneproxyEgress, false) >= 3
	})
	if n := car.count(from, toExternal, controlplane.ViaLegacyEgress, true); n > 0 {
		t.Fatalf("the sidecar went back to the legacy egress (%d samples)", n)
	}
	if v := cp.SidecarView("payments", controlplane.LocalZone); !v.Frozen {
		t.Fatalf("the sidecar's configuration is not frozen: %+v", v)
	}
}

// The guide's reasons for the MeshZoneAddress coming after the
// MeshIdentity, and for numbered MeshService ports on 2.14: either way the
// sidecar reaches the zoneproxy ingress with an SNI it does not match,
// until that is fixed.
func TestKuma214MZATrapsSendSidecarsAnSNINothingMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		identity, numbers bool
		fix               func(cp *controlplane.Server) error
	}{
		{"MZA before MeshIdentity", false, true, func(cp *controlplane.Server) error { return cp.SetMeshIdentity("payments", true) }},
		{"named MeshService port", true, false, func(cp *controlplane.Server) error { return cp.SetMeshServicePortNamed("payments", false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zone, _, _ := migrationZone(t, tc.identity, false)
			cp := zone.CP
			if err := cp.SetMeshServicePortNamed("payments", !tc.numbers); err != nil {
				t.Fatal(err)
			}
			car := startMigrationSidecar(t, cp, "payments", toRemote)
			car.await(t, toRemote, controlplane.ViaLegacyIngress, 3)
			ingress, _ := readyZoneProxy(t, zone, "ingress", "zp-ingress")
			from := car.mark()
			setMZA(t, zone, ingress)
			harness.Eventually(t, promptly, "the sidecar's connections to the ingress closed for want of a filter chain", func() bool {
				return car.count(from, toRemote, controlplane.ViaMeshZoneAddress, false) >= 3
			})
			for _, bad := range car.unusable(from) {
				if !strings.Contains(bad, "closed: no filter chain") {
					t.Fatalf("a sample failed otherwise: %s", bad)
				}
			}
			if err := tc.fix(cp); err != nil {
				t.Fatal(err)
			}
			car.await(t, toRemote, controlplane.ViaMeshZoneAddress, 3)
		})
	}
}
