package dataplane

import (
	"fmt"
	"net"
	"strings"
)

// FieldError is one problem at a field path, worded like the control plane.
type FieldError struct {
	Field   string
	Message string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// Errors is every problem found, in the control plane's order.
type Errors []FieldError

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, fe := range e {
		parts[i] = fe.Error()
	}
	return strings.Join(parts, "; ")
}

// Kuma's mesh names are ^[0-9a-z-_.]*$; dots are refused here (see
// validMeshName) because they split the node id "<mesh>.<name>" wrongly.

// ValidateMeta checks name, mesh and the workload label the way kuma-dp and
// the REST API do (the /bootstrap handler does not, so mistakes would only
// surface on the ADS stream).
func (d Dataplane) ValidateMeta() Errors {
	var errs Errors
	if d.Mesh == "" {
		errs = append(errs, FieldError{"mesh", "cannot be empty"})
	} else if !validMeshName(d.Mesh) {
		errs = append(errs, FieldError{"mesh", fmt.Sprintf("invalid mesh name %q: use lowercase letters, digits, '-' and '_'", d.Mesh)})
	}
	switch {
	case d.Name == "":
		errs = append(errs, FieldError{"name", "cannot be empty"})
	case len(d.Name) > 253 || !validDNS1123Subdomain(d.Name):
		errs = append(errs, FieldError{"name", fmt.Sprintf("invalid name %q: must be a lowercase RFC 1123 subdomain ('a-z', '0-9', '-', '.'; start and end alphanumeric; at most 253 characters)", d.Name)})
	}
	if w, ok := d.Labels[WorkloadLabel]; ok && (len(w) > 63 || !validDNS1035Label(w)) {
		errs = append(errs, FieldError{"labels[\"" + WorkloadLabel + "\"]", fmt.Sprintf("invalid workload %q: must be a DNS-1035 label (lowercase letters, digits and '-', start with a letter, at most 63 characters)", w)})
	}
	return errs
}

// Validate applies the control plane's Dataplane rules for a zone proxy
// (networking address and listeners) with its messages.
func (d Dataplane) Validate() Errors {
	var errs Errors
	errs = append(errs, validateAddress("networking.address", d.Networking.Address)...)

	names := map[string]bool{}
	type key struct {
		addr string
		port uint32
	}
	used := map[key]string{}
	for i, l := range d.Networking.Listeners {
		path := fmt.Sprintf("networking.listeners[%d]", i)
		if l.Type != TypeZoneIngress && l.Type != TypeZoneEgress {
			errs = append(errs, FieldError{path + ".type", "type must be ZoneIngress or ZoneEgress"})
		}
		errs = append(errs, validateAddress(path+".address", l.Address)...)
		if l.Port < 1 || l.Port > 65535 {
			errs = append(errs, FieldError{path + ".port", "port must be in the range [1, 65535]"})
		}
		name := l.SectionName()
		if names[name] {
			errs = append(errs, FieldError{path + ".name", fmt.Sprintf("name %q must be unique across inbounds and listeners", name)})
		}
		names[name] = true
		k := key{l.Address, l.Port}
		if other, ok := used[k]; ok {
			if other == l.Type {
				errs = append(errs, FieldError{path, fmt.Sprintf("address:port %s:%d is already used by another listener", l.Address, l.Port)})
			} else {
				errs = append(errs, FieldError{path, fmt.Sprintf("address:port %s:%d is used by listeners of different types", l.Address, l.Port)})
			}
		} else {
			used[k] = l.Type
		}
	}
	return errs
}

func validateAddress(field, addr string) Errors {
	switch {
	case addr == "":
		return Errors{{field, "address can't be empty"}}
	case addr == "0.0.0.0" || addr == "::":
		return Errors{{field, "must not be 0.0.0.0 or ::"}}
	case net.ParseIP(addr) == nil && !validHostname(addr):
		return Errors{{field, "address has to be valid IP address or domain name"}}
	}
	return nil
}
