// Package dataplane renders the mesh-scoped Dataplane resource a zone proxy
// registers with, and validates it with the control plane's rules and
// messages so that mistakes fail before any request. No I/O here.
package dataplane

import (
	"encoding/json"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Listener types and the section names the agent gives them.
const (
	TypeZoneIngress = "ZoneIngress"
	TypeZoneEgress  = "ZoneEgress"

	IngressListenerName = "zi-port"
	EgressListenerName  = "ze-port"

	// WorkloadLabel identifies the workload; tokens may be bound to it.
	WorkloadLabel = "kuma.io/workload"
)

// Dataplane is the resource in Kuma's REST ("flat") format: meta and spec
// fields side by side, as the control plane's /bootstrap expects it.
type Dataplane struct {
	Type       string            `json:"type" yaml:"type"`
	Mesh       string            `json:"mesh" yaml:"mesh"`
	Name       string            `json:"name" yaml:"name"`
	Labels     map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	Networking Networking        `json:"networking" yaml:"networking"`
}

// Networking holds the proxy's address and its zone listeners.
type Networking struct {
	Address   string     `json:"address" yaml:"address"`
	Admin     *Admin     `json:"admin,omitempty" yaml:"admin,omitempty"`
	Listeners []Listener `json:"listeners" yaml:"listeners"`
}

// Admin sets the port of Envoy's admin listener that the control plane
// exposes on the proxy's address; zone proxies sharing a host need distinct ones.
type Admin struct {
	Port uint32 `json:"port" yaml:"port"`
}

// Listener is one zone listener: Envoy binds Address:Port.
type Listener struct {
	Type    string `json:"type" yaml:"type"`
	Address string `json:"address" yaml:"address"`
	Port    uint32 `json:"port" yaml:"port"`
	Name    string `json:"name,omitempty" yaml:"name,omitempty"`
}

// SectionName is how policies and Envoy listener names refer to a listener.
func (l Listener) SectionName() string {
	if l.Name != "" {
		return l.Name
	}
	return strconv.FormatUint(uint64(l.Port), 10)
}

// EnvoyListenerName is the name the control plane gives the Envoy listener.
func (l Listener) EnvoyListenerName() string {
	switch l.Type {
	case TypeZoneIngress:
		return "self_zoneingress_dp_" + l.SectionName()
	case TypeZoneEgress:
		return "self_zoneegress_dp_" + l.SectionName()
	}
	return ""
}

// Spec is what the agent knows about the proxy it runs.
type Spec struct {
	Mesh        string
	Name        string
	Workload    string
	Labels      map[string]string
	Address     string
	AdminPort   uint32
	IngressPort uint32 // 0 = no ZoneIngress listener
	EgressPort  uint32 // 0 = no ZoneEgress listener
}

// Render builds the Dataplane for spec. The workload becomes the
// kuma.io/workload label; other labels are copied as given.
func Render(s Spec) Dataplane {
	labels := make(map[string]string, len(s.Labels)+1)
	for k, v := range s.Labels {
		labels[k] = v
	}
	if s.Workload != "" {
		labels[WorkloadLabel] = s.Workload
	}
	dp := Dataplane{
		Type:   "Dataplane",
		Mesh:   s.Mesh,
		Name:   s.Name,
		Labels: labels,
		Networking: Networking{
			Address:   s.Address,
			Listeners: []Listener{},
		},
	}
	if s.AdminPort != 0 {
		dp.Networking.Admin = &Admin{Port: s.AdminPort}
	}
	if s.IngressPort != 0 {
		dp.Networking.Listeners = append(dp.Networking.Listeners, Listener{
			Type: TypeZoneIngress, Address: s.Address, Port: s.IngressPort, Name: IngressListenerName,
		})
	}
	if s.EgressPort != 0 {
		dp.Networking.Listeners = append(dp.Networking.Listeners, Listener{
			Type: TypeZoneEgress, Address: s.Address, Port: s.EgressPort, Name: EgressListenerName,
		})
	}
	return dp
}

// JSON is the compact JSON sent as dataplaneResource.
func (d Dataplane) JSON() string {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // plain strings and numbers cannot fail to marshal
	}
	return string(b)
}

// YAML is the form an operator reviews or applies with kumactl.
func (d Dataplane) YAML() string { return toYAML(d) }

// toYAML encodes resources with kumactl's two-space indent; plain structs
// of strings and numbers cannot fail to encode.
func toYAML(v any) string {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return b.String()
}
