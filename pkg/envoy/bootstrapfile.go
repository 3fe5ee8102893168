package envoy

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// AdminFromBootstrap finds the admin address in an Envoy bootstrap (YAML or
// JSON; protojson camelCase as the control plane writes it, or snake_case).
// yaml.v3 is already linked for the config file; the agent needs no more.
func AdminFromBootstrap(doc []byte) (AdminAddress, error) {
	var b struct {
		Admin *struct {
			Address *struct {
				Pipe *struct {
					Path string `yaml:"path"`
				} `yaml:"pipe"`
				SocketAddress  *socketAddress `yaml:"socketAddress"`
				SocketAddress2 *socketAddress `yaml:"socket_address"`
			} `yaml:"address"`
		} `yaml:"admin"`
	}
	if err := yaml.Unmarshal(doc, &b); err != nil {
		return AdminAddress{}, fmt.Errorf("bootstrap is not valid YAML: %w", err)
	}
	if b.Admin == nil || b.Admin.Address == nil {
		return AdminAddress{}, errors.New("bootstrap has no admin address; zoneproxy needs Envoy's admin API to check readiness and drain")
	}
	a := b.Admin.Address
	if a.Pipe != nil && a.Pipe.Path != "" {
		return AdminAddress{Socket: a.Pipe.Path}, nil
	}
	sa := a.SocketAddress
	if sa == nil {
		sa = a.SocketAddress2
	}
	if sa == nil || sa.Address == "" {
		return AdminAddress{}, errors.New("bootstrap admin address is neither a pipe nor a socket address")
	}
	port := sa.PortValue
	if port == 0 {
		port = sa.PortValue2
	}
	host := sa.Address
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // a wildcard admin is reached on loopback
	}
	return AdminAddress{TCP: net.JoinHostPort(host, strconv.Itoa(int(port)))}, nil
}

type socketAddress struct {
	Address    string `yaml:"address"`
	PortValue  uint32 `yaml:"portValue"`
	PortValue2 uint32 `yaml:"port_value"`
}
