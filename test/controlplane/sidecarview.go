package controlplane

import (
	"fmt"
	"hash/fnv"
	"time"
)

// How a sidecar reaches a destination (SidecarRoute.Via).
const (
	ViaZoneproxyEgress = "zoneproxy-egress" // a Dataplane's Ready ZoneEgress listener
	ViaLegacyEgress    = "legacy-egress"    // a legacy ZoneEgress
	ViaMeshZoneAddress = "meshzoneaddress"  // the remote zone's MeshZoneAddress
	ViaLegacyIngress   = "legacy-ingress"   // the remote zone's legacy ZoneIngress
)

// The destinations a SidecarView is about: MeshExternalService "httpbin"
// port 80 (through an egress) and MeshService "backend" port 80 of the
// remote zone (through its ingress).
const (
	viewExternalService = "httpbin"
	viewMeshService     = "backend"
	viewPort            = 80
)

// SidecarRoute is one endpoint a sidecar sends a destination's traffic to,
// and the SNI its ClientHello names.
type SidecarRoute struct {
	Via     string `json:"via"`
	Name    string `json:"name"` // the Dataplane, ZoneEgress, ZoneIngress or MeshZoneAddress
	Address string `json:"address"`
	Port    uint32 `json:"port"`
	SNI     string `json:"sni"`
}

// SidecarView is what kuma-cp 2.14.3 has configured a sidecar of Mesh,
// in a zone other than Zone, with, as of AsOf (At minus the propagation
// lag): Egress for MeshExternalService "httpbin" port 80, Ingress for
// MeshService "backend" port 80 of Zone. Frozen: every update fails
// ("inconsistent snapshot"), so the routes are the last ones kuma-cp
// could build, since FrozenSince.
type SidecarView struct {
	At           time.Time      `json:"at"`
	AsOf         time.Time      `json:"asOf"`
	Mesh         string         `json:"mesh"`
	Zone         string         `json:"zone"`
	MeshIdentity bool           `json:"meshIdentity"`
	Egress       []SidecarRoute `json:"egress"`
	Ingress      []SidecarRoute `json:"ingress"`
	Frozen       bool           `json:"frozen"`
	FrozenSince  *time.Time     `json:"frozenSince,omitempty"`
}

// SidecarView is what a sidecar of mesh is sent now for zone's service
// and the external service (see SidecarView's type).
func (s *Server) SidecarView(mesh, zone string) SidecarView {
	return s.SidecarViewAt(mesh, zone, time.Now())
}

// SidecarViewAt is SidecarView as it was (or will be, with no further
// change) at t.
func (s *Server) SidecarViewAt(mesh, zone string, t time.Time) SidecarView {
	s.mu.Lock()
	defer s.mu.Unlock()
	asOf := t.Add(-s.timings.EgressPropagation)
	// The last configuration kuma-cp could build is the one a frozen
	// sidecar keeps: replay every change to find it.
	var good *SidecarView
	var frozenSince time.Time
	for _, at := range append(s.migrationInstantsLocked(mesh, asOf), asOf) {
		v, frozen := s.buildViewLocked(mesh, zone, at)
		switch {
		case !frozen:
			good, frozenSince = &v, time.Time{}
		case frozenSince.IsZero():
			frozenSince = at
		}
	}
	v, frozen := s.buildViewLocked(mesh, zone, asOf)
	if frozen {
		if good != nil {
			v.Egress, v.Ingress = good.Egress, good.Ingress
		} else {
			v.Egress, v.Ingress = nil, nil
		}
		v.Frozen, v.FrozenSince = true, timePtr(frozenSince)
	}
	v.At, v.AsOf = t, asOf
	if v.Egress == nil {
		v.Egress = []SidecarRoute{}
	}
	if v.Ingress == nil {
		v.Ingress = []SidecarRoute{}
	}
	return v
}

// buildViewLocked is kuma-cp 2.14.3's choice over the resources at t, and
// whether building it fails.
//   - Egress (resolveZoneEgresses): the mesh's Ready ZoneEgress listeners,
//     or the legacy ZoneEgresses when there is none; never both. With a
//     MeshIdentity the sidecar names the KRI SNI, and a MeshExternalService
//     cluster is built only for mesh-scoped egresses while its endpoints
//     are built for legacy ones: "inconsistent snapshot" (frozen).
//   - Ingress (fillRemoteMeshServices): the zone's MeshZoneAddresses, or its
//     legacy ZoneIngresses when it has none. The KRI SNI only with a
//     MeshIdentity and through an MZA (meshroute/clusters.go
//     ZonesWithMeshScopedProxy); it ends in the port number, as 2.14.3's
//     sidecars send it for named ports too.
func (s *Server) buildViewLocked(mesh, zone string, t time.Time) (SidecarView, bool) {
	r := s.migration.at(t)
	v := SidecarView{Mesh: mesh, Zone: zone, MeshIdentity: r.identity[mesh]}
	egressSNI := legacySNI(viewExternalService, mesh, "mes", viewPort)
	if v.MeshIdentity {
		egressSNI = DestinationSNI(mesh, "egress")
	}
	frozen := false
	if set := egressSet(s.meshStateLocked(mesh, t)); len(set) > 0 {
		for _, e := range set {
			v.Egress = append(v.Egress, SidecarRoute{ViaZoneproxyEgress, e.Dataplane, e.Address, e.Port, egressSNI})
		}
	} else {
		for _, n := range sortedNames(r.egresses) {
			e := r.egresses[n]
			v.Egress = append(v.Egress, SidecarRoute{ViaLegacyEgress, n, e.Address, e.Port, egressSNI})
		}
		frozen = v.MeshIdentity && len(v.Egress) > 0
	}
	for _, n := range sortedNames(r.mzas[mesh]) {
		m := r.mzas[mesh][n]
		if m.Zone != zone {
			continue
		}
		sni := legacySNI(viewMeshService, mesh, "ms", viewPort)
		if v.MeshIdentity {
			sni = fmt.Sprintf("sni.msvc.%s.%s.%s.%d", mesh, zone, viewMeshService, viewPort)
		}
		v.Ingress = append(v.Ingress, SidecarRoute{ViaMeshZoneAddress, n, m.Address, m.Port, sni})
	}
	if len(v.Ingress) == 0 {
		for _, n := range sortedNames(r.ingresses) {
			zi := r.ingresses[n]
			if zi.Zone == zone {
				v.Ingress = append(v.Ingress, SidecarRoute{ViaLegacyIngress, n, zi.Address, zi.Port, legacySNI(viewMeshService, mesh, "ms", viewPort)})
			}
		}
	}
	return v, frozen
}

// legacySNI is the hash-based SNI sidecars send to legacy zone proxies
// (and without a MeshIdentity to any), kuma-cp's tls.SNIForResource with
// no additional data: "a" + fnv64a("name;mesh;") + ".name.port.mesh." +
// the type ("ms" MeshService, "mes" MeshExternalService).
func legacySNI(name, mesh, typeAbbrev string, port int) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s;%s;", name, mesh)
	const labelLimit = 63
	if len(name) > labelLimit-1 {
		name = name[:labelLimit-1] + "x"
	}
	if len(mesh) > labelLimit-1 {
		mesh = mesh[:labelLimit-1] + "x"
	}
	return fmt.Sprintf("a%x.%s.%d.%s.%s", h.Sum(nil), name, port, mesh, typeAbbrev)
}

// LegacySNI is the SNI a sidecar sends a legacy zone proxy for the
// SidecarView's destination behind role: MeshService "backend" port 80
// ("ingress") or MeshExternalService "httpbin" port 80 ("egress").
func LegacySNI(mesh, role string) string {
	switch role {
	case "ingress":
		return legacySNI(viewMeshService, mesh, "ms", viewPort)
	case "egress":
		return legacySNI(viewExternalService, mesh, "mes", viewPort)
	}
	return ""
}
