// Package lkgcache keeps Envoy's last-known-good xDS configuration on disk
// so that a zone proxy can be served while the control plane is
// unreachable, across agent and VM restarts. A cache is tied to one
// identity (mesh, name, role, control plane), never used past its maximum
// age nor with an expired certificate, and written behind the relay so a
// slow disk never delays configuration delivery.
package lkgcache

import (
	"slices"
	"sort"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// Identity is who a cache was made for; a cache of another identity is
// never used.
type Identity struct {
	Mesh         string
	Name         string
	Role         string
	ControlPlane string // the --cp-address the configuration came from
}

// Resource is one xDS resource as the control plane encoded it.
type Resource struct {
	Name    string
	Version string
	TypeURL string // of the packed resource (Any.type_url)
	Body    []byte // Any.value, never re-encoded
}

// TypeState is what Envoy holds of one resource type.
type TypeState struct {
	TypeURL   string
	Version   string // the control plane's last version info for the type
	Resources []Resource
}

// Snapshot is a whole cache: Envoy's configuration after its last ACK of a
// control plane response, with the (tokenless) bootstrap it ran with and
// how the relay reached the control plane, so that both can be started
// again while the control plane is unreachable.
type Snapshot struct {
	Identity  Identity
	WrittenAt time.Time // when Envoy ACKed the last of it from the control plane
	Bootstrap []byte
	Upstream  cpdial.Target
	Types     []TypeState
}

// Holds says whether s (nil: none) has a resource of typeURL named name.
func (s *Snapshot) Holds(typeURL, name string) bool {
	if s == nil {
		return false
	}
	t := s.Type(typeURL)
	return t != nil && slices.ContainsFunc(t.Resources, func(r Resource) bool { return r.Name == name })
}

// Type returns the state of typeURL, nil if the snapshot has none.
func (s *Snapshot) Type(typeURL string) *TypeState {
	for i := range s.Types {
		if s.Types[i].TypeURL == typeURL {
			return &s.Types[i]
		}
	}
	return nil
}

// Age is how old the configuration is at now.
func (s *Snapshot) Age(now time.Time) time.Duration { return now.Sub(s.WrittenAt) }

// normalize sorts types and resources so equal states encode equally.
func (s *Snapshot) normalize() {
	sort.Slice(s.Types, func(i, j int) bool { return s.Types[i].TypeURL < s.Types[j].TypeURL })
	for _, t := range s.Types {
		sort.Slice(t.Resources, func(i, j int) bool { return t.Resources[i].Name < t.Resources[j].Name })
	}
}
