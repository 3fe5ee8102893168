package controlplane

import (
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// storeEgress writes a Dataplane with one ZoneEgress listener in state to
// the store, as a registration would.
func storeEgress(s *Server, mesh, name, state string, port uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store.record(dpKey{mesh, name}, DataplaneEvent{At: time.Now(), Kind: DataplaneUpserted,
		Listeners: []DataplaneListener{{Type: "ZoneEgress", Address: "127.0.0.1", Port: port, State: state}}})
}

// routeOf is every route's "via sni", comma-separated: a mix of legacy
// and mesh-scoped proxies shows.
func routeOf(rs []SidecarRoute) string {
	if len(rs) == 0 {
		return "none"
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Via+" "+r.SNI)
	}
	return strings.Join(out, ", ")
}

// What kuma-cp 2.14.3 sends a sidecar as the migration's resources change
// (mesh-scoped egress winning, MZA winning, MeshIdentity choosing the SNI,
// the legacy egress freezing the sidecar once a MeshIdentity exists).
func TestSidecarViewFollowsKuma214sChoices(t *testing.T) {
	legacyMS, legacyMES := LegacySNI("payments", "ingress"), LegacySNI("payments", "egress")
	kriMS, kriMES := "sni.msvc.payments.default.backend.80", DestinationSNI("payments", "egress")
	for _, tc := range []struct {
		name            string
		setup           func(t *testing.T, s *Server)
		egress, ingress string
		frozen          bool
	}{
		{"nothing", func(*testing.T, *Server) {}, "none", "none", false},
		{"legacy proxies", legacy, "legacy-egress " + legacyMES, "legacy-ingress " + legacyMS, false},
		{"a NotReady zoneproxy egress is not used", func(t *testing.T, s *Server) {
			legacy(t, s)
			storeEgress(s, "payments", "zp-egress", "NotReady", 10001)
		}, "legacy-egress " + legacyMES, "legacy-ingress " + legacyMS, false},
		{"a Ready zoneproxy egress wins, legacy SNI without MeshIdentity", func(t *testing.T, s *Server) {
			legacy(t, s)
			storeEgress(s, "payments", "zp-egress", "Ready", 10001)
		}, "zoneproxy-egress " + legacyMES, "legacy-ingress " + legacyMS, false},
		{"MeshIdentity with only the legacy egress freezes the last configuration", func(t *testing.T, s *Server) {
			legacy(t, s)
			must(t, s.SetMeshIdentity("payments", true))
		}, "legacy-egress " + legacyMES, "legacy-ingress " + legacyMS, true},
		{"MeshIdentity and a Ready zoneproxy egress: KRI SNI; a legacy-only zone keeps the legacy SNI", func(t *testing.T, s *Server) {
			legacy(t, s)
			must(t, s.SetMeshIdentity("payments", true))
			storeEgress(s, "payments", "zp-egress", "Ready", 10001)
		}, "zoneproxy-egress " + kriMES, "legacy-ingress " + legacyMS, false},
		{"an MZA wins over the legacy ingress, KRI SNI with MeshIdentity", func(t *testing.T, s *Server) {
			legacy(t, s)
			must(t, s.SetMeshIdentity("payments", true))
			storeEgress(s, "payments", "zp-egress", "Ready", 10001)
			must(t, s.SetMeshZoneAddress("payments", "zp", MeshZoneAddress{Zone: LocalZone, Address: "127.0.0.1", Port: 10002}))
		}, "zoneproxy-egress " + kriMES, "meshzoneaddress " + kriMS, false},
		{"an MZA before MeshIdentity: the legacy SNI to it", func(t *testing.T, s *Server) {
			legacy(t, s)
			must(t, s.SetMeshZoneAddress("payments", "zp", MeshZoneAddress{Zone: LocalZone, Address: "127.0.0.1", Port: 10002}))
		}, "legacy-egress " + legacyMES, "meshzoneaddress " + legacyMS, false},
		{"an MZA of another zone changes nothing", func(t *testing.T, s *Server) {
			legacy(t, s)
			must(t, s.SetMeshZoneAddress("payments", "zp", MeshZoneAddress{Zone: "zone-3", Address: "127.0.0.1", Port: 10002}))
		}, "legacy-egress " + legacyMES, "legacy-ingress " + legacyMS, false},
		{"the MZA deleted: back to the legacy ingress", func(t *testing.T, s *Server) {
			legacy(t, s)
			must(t, s.SetMeshZoneAddress("payments", "zp", MeshZoneAddress{Zone: LocalZone, Address: "127.0.0.1", Port: 10002}))
			s.DeleteMeshZoneAddress("payments", "zp")
		}, "legacy-egress " + legacyMES, "legacy-ingress " + legacyMS, false},
		{"the zoneproxy egress deleted while a legacy one exists: the sidecar keeps it", func(t *testing.T, s *Server) {
			legacy(t, s)
			must(t, s.SetMeshIdentity("payments", true))
			storeEgress(s, "payments", "zp-egress", "Ready", 10001)
			s.mu.Lock()
			s.store.record(dpKey{"payments", "zp-egress"}, DataplaneEvent{At: time.Now(), Kind: DataplaneDeleted})
			s.mu.Unlock()
		}, "zoneproxy-egress " + kriMES, "legacy-ingress " + legacyMS, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: Kuma214, EgressPropagation: -1})
			tc.setup(t, s)
			v := s.SidecarView("payments", LocalZone)
			if got := routeOf(v.Egress); got != tc.egress {
				t.Errorf("egress: %s, want %s", got, tc.egress)
			}
			if got := routeOf(v.Ingress); got != tc.ingress {
				t.Errorf("ingress: %s, want %s", got, tc.ingress)
			}
			if v.Frozen != tc.frozen {
				t.Errorf("frozen %t, want %t", v.Frozen, tc.frozen)
			}
		})
	}
}

func legacy(t *testing.T, s *Server) {
	must(t, s.SetLegacyZoneEgress("legacy-egress", LegacyZoneEgress{Address: "127.0.0.1", Port: 9001}))
	must(t, s.SetLegacyZoneIngress("legacy-ingress", LegacyZoneIngress{Zone: LocalZone, Address: "127.0.0.1", Port: 9002}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A change reaches the view only after the propagation lag.
func TestSidecarViewLagsByThePropagation(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, EgressPropagation: time.Hour})
	legacy(t, s)
	if v := s.SidecarView("payments", LocalZone); len(v.Ingress) != 0 || len(v.Egress) != 0 {
		t.Fatalf("a change reached the sidecar at once: %+v", v)
	}
	if v := s.SidecarViewAt("payments", LocalZone, time.Now().Add(time.Hour)); routeOf(v.Ingress) == "none" {
		t.Fatalf("after the lag the sidecar still has no ingress: %+v", v)
	}
}

// kuma-cp's own expectation for SNIForResource (pkg/xds/envoy/tls/sni_test.go
// at v2.14.3, no additional data).
func TestLegacySNIIsKumaCPsHashFormat(t *testing.T) {
	if got, want := legacySNI("backend", "demo", "ms", 8080), "ae10a8071b8a8eeb8.backend.8080.demo.ms"; got != want {
		t.Fatalf("legacySNI = %q, want %q", got, want)
	}
}

// Bad input is refused with the field named.
func TestMigrationResourcesAreValidated(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"ingress without zone", s.SetLegacyZoneIngress("zi", LegacyZoneIngress{Address: "127.0.0.1", Port: 1}), "zone: required"},
		{"egress with a name for an address", s.SetLegacyZoneEgress("ze", LegacyZoneEgress{Address: "egress.local", Port: 1}), `address "egress.local": must be an IP address`},
		{"egress port 0", s.SetLegacyZoneEgress("ze", LegacyZoneEgress{Address: "127.0.0.1"}), "port 0: must be 1-65535"},
		{"identity of a missing mesh", s.SetMeshIdentity("orders", true), `mesh "orders": not found`},
		{"MZA without zone", s.SetMeshZoneAddress("payments", "zp", MeshZoneAddress{Address: "127.0.0.1", Port: 1}), "zone: required"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

// The admin API sets the same resources, refuses bad bodies naming the
// field, and serves the view.
func TestMigrationAdminAPI(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, EgressPropagation: -1})
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", "/zone-egresses/legacy", `{"address":"127.0.0.1","port":9001}`, 200, "{}"},
		{"PUT", "/zone-ingresses/legacy", `{"zone":"default","address":"127.0.0.1","port":9002}`, 200, "{}"},
		{"PUT", "/zone-ingresses/bad", `{"zone":"default","address":"127.0.0.1","port":9002,"typo":1}`, 400, `unknown field "typo"`},
		{"PUT", "/meshes/payments/meshservice-port", `{}`, 400, "named: required"},
		{"PUT", "/meshes/orders/meshidentity", ``, 400, `mesh "orders": not found`},
		{"GET", "/meshes/payments/sidecar", ``, 200, `"via":"legacy-ingress"`},
		{"PUT", "/meshes/payments/meshzoneaddresses/zp", `{"zone":"default","address":"127.0.0.1","port":9003}`, 200, "{}"},
		{"GET", "/meshes/payments/sidecar?zone=default", ``, 200, `"via":"meshzoneaddress","name":"zp","address":"127.0.0.1","port":9003`},
		{"DELETE", "/meshes/payments/meshzoneaddresses/zp", ``, 200, "{}"},
		{"PUT", "/meshes/payments/meshidentity", ``, 200, "{}"},
		{"GET", "/meshes/payments/sidecar", ``, 200, `"frozen":true`},
	} {
		code, body := testutil.HTTP(t, tc.method, s.AdminURL()+tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Fatalf("%s %s: %d %s, want %d with %s", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
}
