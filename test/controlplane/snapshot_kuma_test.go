package controlplane

import (
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

const ingressLDS = "self_zoneingress_dp_zi-port"

// An ingress whose mesh has no MeshService (zone listeners withheld): 2.14
// over SotW sends no LDS at all, until the listener exists; 3.0 over delta
// sends an empty LDS.
func TestAnIngressWithoutMeshServiceGetsNoLDSOn214(t *testing.T) {
	for _, kuma := range []string{Kuma214, Kuma30} {
		t.Run(kuma, func(t *testing.T) {
			s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: kuma})
			if err := s.WithholdZoneListeners("payments", "zp-ingress-1", true); err != nil {
				t.Fatal(err)
			}
			tok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-ingress"})
			node := nodeFor(t, s, dpJSON(t, "payments", "zp-ingress-1", "zp-ingress", ingressListener), nil)
			if kuma == Kuma30 {
				st := dialADS(t, s, tok, node).collect(func(st xdsState) bool { _, ok := st[resourcev3.ListenerType]; return ok })
				if n := len(st[resourcev3.ListenerType]); n != 0 {
					t.Errorf("3.0 sent %d listeners, want an empty LDS", n)
				}
				return
			}
			c := dialSotW(t, s, tok, node)
			c.collect(hasAll(resourcev3.ClusterType, "system_envoy_admin"))
			c.expectNoResponse(time.Second)
			if err := s.WithholdZoneListeners("payments", "zp-ingress-1", false); err != nil {
				t.Fatal(err)
			}
			st := c.collect(hasAll(resourcev3.ListenerType, ingressLDS))
			if !st[resourcev3.ListenerType][ingressLDS].(*listenerv3.Listener).GetEnableReusePort().GetValue() {
				t.Error("2.14 left enable_reuse_port unset or false for a proxy advertising feature-reuse-port")
			}
			// Emptied again: a new version, sent as an empty LDS.
			if err := s.WithholdZoneListeners("payments", "zp-ingress-1", true); err != nil {
				t.Fatal(err)
			}
			c.collect(func(st xdsState) bool { l, ok := st[resourcev3.ListenerType]; return ok && len(l) == 0 })
		})
	}
}
