// Package listenwatch keeps READY honest about Envoy's zone listeners: it
// asks Envoy's admin which listeners exist, says why one is missing (the
// control plane has not sent it, or Envoy could not bind it and who holds
// its port), and asks for a restart of Envoy once a rejected port is free.
// The agent decides when that restart happens.
package listenwatch

import (
	"net"
	"strconv"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
)

// Zone is one listener the control plane should send.
type Zone struct {
	Name string // Envoy's listener name, e.g. self_zoneegress_dp_ze-port
	Addr string // host:port
	Host string
	Port uint32
	Why  string // when the control plane sends it, for the operator
}

// Expected are the zone listeners cfg's Dataplane asks for.
func Expected(cfg *config.Config) []Zone {
	var out []Zone
	for _, l := range cfg.Dataplane().Networking.Listeners {
		out = append(out, Zone{Name: l.EnvoyListenerName(), Host: l.Address, Port: l.Port,
			Addr: net.JoinHostPort(l.Address, strconv.FormatUint(uint64(l.Port), 10)),
			Why:  ZoneListenerCondition(l.Type)})
	}
	return out
}

// Names are the Envoy listener names of zs.
func Names(zs []Zone) []string {
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = z.Name
	}
	return out
}

// ZoneListenerCondition says when the control plane sends the listener of
// a zone listener type, and what the operator can do about it.
func ZoneListenerCondition(listenerType string) string {
	switch listenerType {
	case dataplane.TypeZoneIngress:
		return "the control plane sends the ingress listener only when this zone has a MeshService: create one (or deploy a service in this zone)"
	case dataplane.TypeZoneEgress:
		return "the control plane sends the egress listener only when a MeshIdentity selects this proxy and the mesh has a MeshExternalService: create them"
	}
	return "the control plane has not sent it"
}
