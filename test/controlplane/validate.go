package controlplane

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// validationError mirrors kuma's ValidationError: violations in order,
// printed as "field: message" joined by "; ".
type validationError struct {
	violations []violation
}

type violation struct{ field, message string }

func (v *validationError) add(field, msg string) {
	v.violations = append(v.violations, violation{field, msg})
}

func (v *validationError) Error() string {
	parts := make([]string, 0, len(v.violations))
	for _, x := range v.violations {
		parts = append(parts, x.field+": "+x.message)
	}
	return strings.Join(parts, "; ")
}

func (v *validationError) orNil() error {
	if len(v.violations) == 0 {
		return nil
	}
	return v
}

var dnsNameRe = regexp.MustCompile(`^([a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})(\.[a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})*[._]?$`)

func validateAddress(v *validationError, path, addr string) {
	switch {
	case addr == "":
		v.add(path, "address can't be empty")
	case addr == "0.0.0.0" || addr == "::":
		v.add(path, "must not be 0.0.0.0 or ::")
	case net.ParseIP(addr) == nil && (len(addr) > 255 || !dnsNameRe.MatchString(addr)):
		v.add(path, "address has to be valid IP address or domain name")
	}
}

func validPort(p uint32) bool { return p >= 1 && p <= 65535 }

// validateDataplane applies the Dataplane rules a zone proxy meets at the
// CP (contract §3.2), with kuma's field paths and messages.
func validateDataplane(dp *dataplane) error {
	v := &validationError{}
	n := dp.Networking
	if n == nil {
		v.add("networking", "must be defined")
		return v
	}
	validateAddress(v, "networking.address", n.Address)
	if len(n.Inbound) > 0 && n.Gateway != nil {
		v.add("networking", "inbound cannot be defined both with gateway")
	}

	if n.AdminPort != 0 {
		for _, in := range n.Inbound {
			addr := in.Address
			if addr == "" {
				addr = n.Address
			}
			if in.Port == n.AdminPort && isLoopback(addr) {
				v.add("networking.admin.port", "must differ from inbound")
				break
			}
		}
		for _, out := range n.Outbound {
			if out.Port == n.AdminPort && (out.Address == "" || isLoopback(out.Address)) {
				v.add("networking.admin.port", "must differ from outbound")
				break
			}
		}
	}

	for i, in := range n.Inbound {
		p := fmt.Sprintf("networking.inbound[%d]", i)
		if !validPort(in.Port) {
			v.add(p+".port", "port must be in the range [1, 65535]")
		}
		if in.ServicePort > 65535 {
			v.add(p+".servicePort", "servicePort must be in the range [0, 65535]")
		}
		if in.ServiceAddress != "" && net.ParseIP(in.ServiceAddress) == nil {
			v.add(p+".serviceAddress", "serviceAddress has to be valid IP address")
		}
		if in.Address != "" && net.ParseIP(in.Address) == nil {
			v.add(p+".address", "address has to be valid IP address")
		}
	}
	for i, out := range n.Outbound {
		p := fmt.Sprintf("networking.outbound[%d]", i)
		if !validPort(out.Port) {
			v.add(p+".port", "port must be in the range [1, 65535]")
		}
		if out.Address != "" && net.ParseIP(out.Address) == nil {
			v.add(p+".address", "address has to be valid IP address")
		}
	}

	if len(n.Listeners) > 0 && n.Gateway != nil && n.Gateway.Type == gatewayTypeValues["DELEGATED"] {
		v.add("networking.listeners", "listeners cannot be defined for delegated gateways")
	}
	inboundNames := map[string]bool{}
	inboundAddrs := map[string]bool{}
	for _, in := range n.Inbound {
		if in.Name != "" {
			inboundNames[in.Name] = true
		}
		addr := in.Address
		if addr == "" {
			addr = n.Address
		}
		inboundAddrs[net.JoinHostPort(addr, strconv.FormatUint(uint64(in.Port), 10))] = true
	}
	listenerNames := map[string]bool{}
	listenerAddrs := map[string]int32{} // address:port -> type of the first listener there
	for i, l := range n.Listeners {
		p := fmt.Sprintf("networking.listeners[%d]", i)
		if l.Type != listenerZoneIngress && l.Type != listenerZoneEgress {
			v.add(p+".type", "type must be ZoneIngress or ZoneEgress")
		}
		validateAddress(v, p+".address", l.Address)
		if !validPort(l.Port) {
			v.add(p+".port", "port must be in the range [1, 65535]")
		}
		if l.Name != "" {
			if inboundNames[l.Name] || listenerNames[l.Name] {
				v.add(p+".name", fmt.Sprintf("name %q must be unique across inbounds and listeners", l.Name))
			}
			listenerNames[l.Name] = true
		}
		if l.Address == "" || !validPort(l.Port) {
			continue
		}
		hp := net.JoinHostPort(l.Address, strconv.FormatUint(uint64(l.Port), 10))
		shown := l.Address + ":" + strconv.FormatUint(uint64(l.Port), 10)
		if t, ok := listenerAddrs[hp]; ok {
			if t == l.Type {
				v.add(p, fmt.Sprintf("address:port %s is already used by another listener", shown))
			} else {
				v.add(p, fmt.Sprintf("address:port %s is used by listeners of different types", shown))
			}
		} else {
			listenerAddrs[hp] = l.Type
		}
		if inboundAddrs[hp] {
			v.add(p, fmt.Sprintf("address:port %s collides with an inbound listener", shown))
		}
	}
	return v.orNil()
}

func isLoopback(addr string) bool {
	ip := net.ParseIP(addr)
	return addr == "localhost" || (ip != nil && ip.IsLoopback())
}
