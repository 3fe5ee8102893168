package e2e

import (
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// Against each modelled kuma-cp release (whatever ZP_E2E_KUMA says),
// the agent's stream is the protocol that release's bootstrap names: SotW
// on 2.14, delta on 3.0.
func TestKuma214ServesTheAgentOverSotW(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ kuma, protocol string }{
		{controlplane.Kuma214, controlplane.ProtocolSotW},
		{controlplane.Kuma30, controlplane.ProtocolDelta},
	} {
		t.Run(tc.kuma, func(t *testing.T) {
			t.Parallel()
			px := readyProxyOn(t, tc.kuma, "egress")
			if px.Protocol != tc.protocol {
				t.Errorf("kuma-cp %s served the agent over %q, want %q", tc.kuma, px.Protocol, tc.protocol)
			}
		})
	}
}

// kuma-cp marks a kumaDp version more than two minors from its own (or of
// another major) as not kumaCpCompatible: the agent's node metadata must
// pass on each supported release, through the relay and in direct mode
// (where Envoy's own node is what kuma-cp judges).
func TestKuma214DoesNotFlagTheAgentIncompatible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kuma  string
		extra []string
	}{
		{kuma: controlplane.Kuma214},
		{kuma: controlplane.Kuma30},
		{kuma: controlplane.Kuma214, extra: []string{"--xds-relay=false"}},
		{kuma: controlplane.Kuma30, extra: []string{"--xds-relay=false"}},
	} {
		t.Run(tc.kuma+strings.Join(tc.extra, ""), func(t *testing.T) {
			t.Parallel()
			px := readyProxyOn(t, tc.kuma, "egress", tc.extra...)
			if !px.KumaCpCompatible {
				t.Errorf("kuma-cp %s flags the agent's kumaDp version %q as not kumaCpCompatible", tc.kuma, px.KumaDpVersion)
			}
		})
	}
}

// readyProxyOn runs a proxy of role against a zone modelling kuma until
// READY, and returns what that control plane knows of its stream.
func readyProxyOn(t *testing.T, kuma, role string, extra ...string) controlplane.ProxyInfo {
	t.Helper()
	zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, Kuma: kuma})
	p := zone.NewProxy("payments", role)
	agent := zone.Start(p, nil, extra...)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	var info controlplane.ProxyInfo
	harness.Eventually(t, promptly, "the control plane to count the proxy connected", func() bool {
		for _, px := range zone.CP.Proxies() {
			if strings.HasPrefix(px.NodeID, "payments.zone-proxy-payments-"+role) && px.Connected {
				info = px
				return true
			}
		}
		return false
	})
	return info
}

// kuma-cp 2.14 sends an ingress whose zone has no MeshService no LDS at
// all, so Envoy stays INITIALIZING: /ready says why and names the fix, and
// the proxy serves once the listener comes.
func TestKuma214IngressWithoutMeshServiceSaysSo(t *testing.T) {
	t.Parallel()
	zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, Kuma: controlplane.Kuma214})
	const name = "zp-nomsvc-ingress"
	if err := zone.CP.WithholdZoneListeners("payments", name, true); err != nil {
		t.Fatal(err)
	}
	p, agent := namedProxy(t, zone, "payments", "ingress", name)
	harness.Eventually(t, promptly, "/ready to say kuma-cp sent no listeners and name MeshService", func() bool {
		code, body := rawReadiness(t, p.Readiness)
		return code == 503 && strings.Contains(body, "WAITING_FOR_CONTROL_PLANE") && strings.Contains(body, "MeshService")
	})
	if err := zone.CP.WithholdZoneListeners("payments", name, false); err != nil {
		t.Fatal(err)
	}
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
}
