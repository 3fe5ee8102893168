package envoy

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
)

// AdminFromBootstrap finds the admin address in an Envoy bootstrap (YAML or
// JSON, camelCase or snake_case). The relay writes JSON with "admin" first:
// the rest need not be read on the launch path.
func AdminFromBootstrap(doc []byte) (AdminAddress, error) {
	admin, err := bootstrapdoc.Section(doc, "admin")
	if err != nil {
		return AdminAddress{}, fmt.Errorf("bootstrap is not valid YAML: %w", err)
	}
	return AdminFromSection(admin)
}

// AdminFromSection reads the admin address from a bootstrap's admin member
// alone, as JSON (nil: the bootstrap has none), for a caller that parsed
// the document already.
func AdminFromSection(admin []byte) (AdminAddress, error) {
	if admin == nil {
		return adminAddress(nil)
	}
	section, err := bootstrapdoc.ParseObject(admin)
	if err != nil {
		return AdminAddress{}, fmt.Errorf("bootstrap admin is unreadable: %w", err)
	}
	addr := &corev3.Address{}
	found, err := section.DecodeKnown("address", addr)
	if err != nil {
		return AdminAddress{}, fmt.Errorf("bootstrap admin is unreadable: %w", err)
	}
	if !found {
		addr = nil
	}
	return adminAddress(addr)
}

func adminAddress(a *corev3.Address) (AdminAddress, error) {
	if a == nil {
		return AdminAddress{}, errors.New("bootstrap has no admin address; zoneproxy needs Envoy's admin API to check readiness and drain")
	}
	if path := a.GetPipe().GetPath(); path != "" {
		return AdminAddress{Socket: path}, nil
	}
	sa := a.GetSocketAddress()
	if sa.GetAddress() == "" {
		return AdminAddress{}, errors.New("bootstrap admin address is neither a pipe nor a socket address")
	}
	host := sa.GetAddress()
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // a wildcard admin is reached on loopback
	}
	return AdminAddress{TCP: net.JoinHostPort(host, strconv.Itoa(int(sa.GetPortValue())))}, nil
}
