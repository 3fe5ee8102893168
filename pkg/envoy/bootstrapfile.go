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
	// The relay writes JSON (which is YAML too) with its keys sorted:
	// "admin" comes first, and the rest need not be read on the launch path.
	if d := bytes.TrimSpace(doc); len(d) > 0 && d[0] == '{' {
		if admin, ok := adminFromJSON(d); ok {
			return adminAddress(admin)
		}
	}
	var b struct {
		Admin *adminSection `yaml:"admin"`
	}
	if err := yaml.Unmarshal(doc, &b); err != nil {
		return AdminAddress{}, fmt.Errorf("bootstrap is not valid YAML: %w", err)
	}
	return adminAddress(b.Admin)
}

// AdminFromSection reads the admin address from a bootstrap's admin member
// alone, as JSON (nil: the bootstrap has none), for a caller that parsed
// the document already.
func AdminFromSection(admin []byte) (AdminAddress, error) {
	if admin == nil {
		return adminAddress(nil)
	}
	var a adminSection
	if err := json.Unmarshal(admin, &a); err != nil {
		return AdminAddress{}, fmt.Errorf("bootstrap admin is unreadable: %w", err)
	}
	return adminAddress(&a)
}

// adminFromJSON decodes the top-level "admin" member of a JSON object and
// stops there; nil if there is none. Not ok: not a JSON object.
func adminFromJSON(d []byte) (*adminSection, bool) {
	dec := json.NewDecoder(bytes.NewReader(d))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		if t == "admin" {
			var a adminSection
			if err := dec.Decode(&a); err != nil {
				return nil, false
			}
			return &a, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, false
		}
	}
	return nil, true
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
