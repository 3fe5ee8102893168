package dataplane

import "fmt"

// MeshZoneAddress publishes a zone ingress's public address to other zones.
// On Universal the operator creates it; its kuma.io/zone label names the
// zone the ingress serves.
type MeshZoneAddress struct {
	Mesh, Name, Zone string
	Address          string
	Port             int
}

type mzaDoc struct {
	Type   string            `yaml:"type"`
	Mesh   string            `yaml:"mesh"`
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
	Spec   struct {
		Address string `yaml:"address"`
		Port    int    `yaml:"port"`
	} `yaml:"spec"`
}

// Validate checks what the control plane requires of the resource; fields
// are named by their path in it.
func (m MeshZoneAddress) Validate() Errors {
	var errs Errors
	if m.Zone == "" {
		errs = append(errs, FieldError{`labels["kuma.io/zone"]`, "required: the zone this ingress serves"})
	}
	if m.Address == "" {
		errs = append(errs, FieldError{"spec.address", "required: the address at which other zones reach this ingress"})
	} else if m.Address == "0.0.0.0" || m.Address == "::" {
		errs = append(errs, FieldError{"spec.address", "must not be 0.0.0.0 or ::"})
	}
	if m.Port < 1 || m.Port > 65535 {
		errs = append(errs, FieldError{"spec.port", fmt.Sprintf("%d is not a port: use 1-65535", m.Port)})
	}
	return errs
}

// YAML is the resource for `kumactl apply -f`.
func (m MeshZoneAddress) YAML() string {
	d := mzaDoc{Type: "MeshZoneAddress", Mesh: m.Mesh, Name: m.Name,
		Labels: map[string]string{"kuma.io/origin": "zone", "kuma.io/zone": m.Zone}}
	d.Spec.Address, d.Spec.Port = m.Address, m.Port
	return toYAML(d)
}
