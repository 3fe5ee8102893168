package controlplane

import (
	"fmt"
	"strconv"
	"strings"
)

// SetMeshServicePortNamed gives the mesh's MeshService "backend" port 80
// the name "http" (named, the default) or no name. kuma-cp 2.14.3 renders
// the port's name into the ingress's SNIs (zoneproxy.BuildRealResource
// Destinations: the KRI's section name is Port.GetName(), the number when
// unnamed), while its sidecars send the number: only an unnamed port is
// reachable through a mesh-scoped ingress on 2.14.3. The mesh's connected
// proxies are sent the change.
func (s *Server) SetMeshServicePortNamed(mesh string, named bool) error {
	if err := s.checkMesh(mesh); err != nil {
		return err
	}
	s.mu.Lock()
	if s.migration.unnamedPorts == nil {
		s.migration.unnamedPorts = map[string]bool{}
	}
	s.migration.unnamedPorts[mesh] = !named
	s.mu.Unlock()
	s.log.printf("MeshService backend of mesh %q: port named=%t", mesh, named)
	st := s.obsState()
	st.mu.Lock()
	var nodes []string
	for id := range st.inputs {
		if strings.HasPrefix(id, mesh+".") {
			nodes = append(nodes, id)
		}
	}
	st.mu.Unlock()
	for _, id := range nodes {
		s.pushSnapshot(id)
	}
	return nil
}

// backendPortSection is the section name of "backend"'s port in mesh's
// ingress SNIs: "http", or "80" when the port has no name.
func (s *Server) backendPortSection(mesh string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.migration.unnamedPorts[mesh] {
		return strconv.Itoa(viewPort)
	}
	return "http"
}

// ingressBackendSNI is the SNI a zone ingress matches for "backend".
func ingressBackendSNI(mesh, section string) string {
	return fmt.Sprintf("sni.msvc.%s.%s.%s.%s", mesh, LocalZone, viewMeshService, section)
}
