package envoy

import (
	"bytes"
	"encoding/json"
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
		Admin *adminSection `yaml:"admin" json:"admin"`
	}
	// The relay writes JSON (which is YAML too): read it as JSON, several
	// times faster, on the launch path.
	if d := bytes.TrimSpace(doc); len(d) > 0 && d[0] == '{' && json.Unmarshal(d, &b) == nil {
		return adminAddress(b.Admin)
	}
	if err := yaml.Unmarshal(doc, &b); err != nil {
		return AdminAddress{}, fmt.Errorf("bootstrap is not valid YAML: %w", err)
	}
	return adminAddress(b.Admin)
}

type adminSection struct {
	Address *struct {
		Pipe *struct {
			Path string `yaml:"path" json:"path"`
		} `yaml:"pipe" json:"pipe"`
		SocketAddress  *socketAddress `yaml:"socketAddress" json:"socketAddress"`
		SocketAddress2 *socketAddress `yaml:"socket_address" json:"socket_address"`
	} `yaml:"address" json:"address"`
}

func adminAddress(admin *adminSection) (AdminAddress, error) {
	if admin == nil || admin.Address == nil {
		return AdminAddress{}, errors.New("bootstrap has no admin address; zoneproxy needs Envoy's admin API to check readiness and drain")
	}
	a := admin.Address
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
	Address    string `yaml:"address" json:"address"`
	PortValue  uint32 `yaml:"portValue" json:"portValue"`
	PortValue2 uint32 `yaml:"port_value" json:"port_value"`
}
