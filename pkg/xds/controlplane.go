package xds

import (
	"fmt"
	"net"
	"net/url"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// ControlPlane is the control plane of the current configuration.
type ControlPlane struct {
	URL string // --cp-address
	// CAPEM is what --ca-cert-file holds, as the agent read it; nil
	// trusts the system's roots.
	CAPEM []byte
}

// dialFor is where the relay goes when Envoy starts on the cache: the
// control plane and the CA of the current configuration, never those the
// cache file names, so that a cache file, whoever wrote it, cannot send
// the token elsewhere. The rest (the metadata kuma-cp asked for, its
// message limit) is kept.
func (cp ControlPlane) dialFor(cached cpdial.Target) (cpdial.Target, error) {
	u, err := url.Parse(cp.URL)
	if err != nil || u.Hostname() == "" {
		return cached, exitcode.AsConfig(fmt.Errorf("%s %q: not a URL with a host", config.KeyCPAddress.Flag(), cp.URL))
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	up := cached
	up.Address, up.ServerName, up.CAPEM = net.JoinHostPort(u.Hostname(), port), u.Hostname(), cp.CAPEM
	return up, nil
}
