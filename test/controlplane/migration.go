package controlplane

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"time"
)

// LocalZone is the zone this control plane's zone proxies are in: the
// zone segment of the SNIs their listeners match. A SidecarView for it is
// what a sidecar of another zone is sent for this zone's services.
const LocalZone = "default"

// LegacyZoneIngress is a legacy ZoneIngress resource (kuma-dp
// --proxy-type ingress): the zone it serves and its advertised address.
type LegacyZoneIngress struct {
	Zone    string `json:"zone"`
	Address string `json:"address"`
	Port    uint32 `json:"port"`
}

// LegacyZoneEgress is a legacy ZoneEgress resource (kuma-dp --proxy-type
// egress).
type LegacyZoneEgress struct {
	Address string `json:"address"`
	Port    uint32 `json:"port"`
}

// MeshZoneAddress is the address other zones reach a zone's mesh-scoped
// ingress at (labelled kuma.io/zone with that zone).
type MeshZoneAddress struct {
	Zone    string `json:"zone"`
	Address string `json:"address"`
	Port    uint32 `json:"port"`
}

// migrationState is every change of the resources the sidecars' choice of
// zone proxy depends on, replayed to the moment a view is taken.
type migrationState struct {
	events []migrationEvent
	// unnamedPorts: meshes whose MeshService "backend" has port 80 without
	// a name, so the ingress matches the number (…backend.80).
	unnamedPorts map[string]bool
}

type migrationEvent struct {
	at    time.Time
	apply func(*migrationResources)
}

type migrationResources struct {
	ingresses map[string]LegacyZoneIngress // by name
	egresses  map[string]LegacyZoneEgress  // by name
	identity  map[string]bool              // mesh -> has a MeshIdentity
	mzas      map[string]map[string]MeshZoneAddress
}

func (m *migrationState) at(t time.Time) *migrationResources {
	r := &migrationResources{
		ingresses: map[string]LegacyZoneIngress{},
		egresses:  map[string]LegacyZoneEgress{},
		identity:  map[string]bool{},
		mzas:      map[string]map[string]MeshZoneAddress{},
	}
	for _, e := range m.events {
		if e.at.After(t) {
			break
		}
		e.apply(r)
	}
	return r
}

// change records a change now, under s.mu.
func (s *Server) change(what string, apply func(*migrationResources)) {
	s.mu.Lock()
	s.migration.events = append(s.migration.events, migrationEvent{at: time.Now(), apply: apply})
	s.mu.Unlock()
	s.log.printf("%s", what)
}

func checkAddress(address string, port uint32) error {
	if net.ParseIP(address) == nil {
		return fmt.Errorf("address %q: must be an IP address", address)
	}
	if port == 0 || port > 65535 {
		return fmt.Errorf("port %d: must be 1-65535", port)
	}
	return nil
}

func (s *Server) checkMesh(mesh string) error {
	if !s.meshExists(mesh) {
		return fmt.Errorf("mesh %q: not found (create it first)", mesh)
	}
	return nil
}

// SetLegacyZoneIngress creates or replaces the legacy ZoneIngress name.
func (s *Server) SetLegacyZoneIngress(name string, zi LegacyZoneIngress) error {
	if name == "" || zi.Zone == "" {
		return errors.New("name and zone: required")
	}
	if err := checkAddress(zi.Address, zi.Port); err != nil {
		return err
	}
	s.change(fmt.Sprintf("ZoneIngress %q zone=%s at %s:%d", name, zi.Zone, zi.Address, zi.Port),
		func(r *migrationResources) { r.ingresses[name] = zi })
	return nil
}

// DeleteLegacyZoneIngress deletes the legacy ZoneIngress name.
func (s *Server) DeleteLegacyZoneIngress(name string) {
	s.change(fmt.Sprintf("ZoneIngress %q deleted", name), func(r *migrationResources) { delete(r.ingresses, name) })
}

// SetLegacyZoneEgress creates or replaces the legacy ZoneEgress name.
func (s *Server) SetLegacyZoneEgress(name string, ze LegacyZoneEgress) error {
	if name == "" {
		return errors.New("name: required")
	}
	if err := checkAddress(ze.Address, ze.Port); err != nil {
		return err
	}
	s.change(fmt.Sprintf("ZoneEgress %q at %s:%d", name, ze.Address, ze.Port),
		func(r *migrationResources) { r.egresses[name] = ze })
	return nil
}

// DeleteLegacyZoneEgress deletes the legacy ZoneEgress name.
func (s *Server) DeleteLegacyZoneEgress(name string) {
	s.change(fmt.Sprintf("ZoneEgress %q deleted", name), func(r *migrationResources) { delete(r.egresses, name) })
}

// SetMeshIdentity makes the mesh have a MeshIdentity (present) or none.
// It decides the SNI format the sidecars send and the freeze of
// SidecarView; it does not withhold any zone proxy's listeners (an
// egress without MeshIdentity: WithholdZoneListeners).
func (s *Server) SetMeshIdentity(mesh string, present bool) error {
	if err := s.checkMesh(mesh); err != nil {
		return err
	}
	s.change(fmt.Sprintf("MeshIdentity of mesh %q present=%t", mesh, present),
		func(r *migrationResources) { r.identity[mesh] = present })
	return nil
}

// SetMeshZoneAddress creates or replaces the mesh's MeshZoneAddress name.
func (s *Server) SetMeshZoneAddress(mesh, name string, mza MeshZoneAddress) error {
	if err := s.checkMesh(mesh); err != nil {
		return err
	}
	if name == "" || mza.Zone == "" {
		return errors.New("name and zone: required")
	}
	if err := checkAddress(mza.Address, mza.Port); err != nil {
		return err
	}
	s.change(fmt.Sprintf("MeshZoneAddress %q of mesh %q zone=%s at %s:%d", name, mesh, mza.Zone, mza.Address, mza.Port),
		func(r *migrationResources) {
			if r.mzas[mesh] == nil {
				r.mzas[mesh] = map[string]MeshZoneAddress{}
			}
			r.mzas[mesh][name] = mza
		})
	return nil
}

// DeleteMeshZoneAddress deletes the mesh's MeshZoneAddress name.
func (s *Server) DeleteMeshZoneAddress(mesh, name string) {
	s.change(fmt.Sprintf("MeshZoneAddress %q of mesh %q deleted", name, mesh),
		func(r *migrationResources) { delete(r.mzas[mesh], name) })
}

// migrationInstantsLocked are the moments up to t at which what a
// sidecar of mesh is sent may have changed, oldest first.
func (s *Server) migrationInstantsLocked(mesh string, t time.Time) []time.Time {
	var out []time.Time
	for _, e := range s.migration.events {
		if !e.at.After(t) {
			out = append(out, e.at)
		}
	}
	for i := range s.store.events {
		e := &s.store.events[i]
		if e.key.mesh == mesh && !e.ev.At.After(t) {
			out = append(out, e.ev.At)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
