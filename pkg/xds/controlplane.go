package xds

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// ControlPlane is the control plane of the current configuration.
type ControlPlane struct {
	URL        string // --cp-address
	CACertFile string // --ca-cert-file; "" trusts the system's roots
}

// dialFor is where the relay goes when Envoy starts on the cache: the
// control plane and the CA of the current configuration, never those the
// cache file names, so that a cache file, whoever wrote it, cannot send
// the token elsewhere. The rest (the metadata kuma-cp asked for, its
// message limit) is kept.
func (cp ControlPlane) dialFor(cached cpdial.Target) (cpdial.Target, error) {
	u, err := url.Parse(cp.URL)
	if err != nil || u.Hostname() == "" {
		return cached, exitcode.AsConfig(fmt.Errorf("--cp-address %q: not a URL with a host", cp.URL))
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	up := cached
	up.Address, up.ServerName, up.CAPEM = net.JoinHostPort(u.Hostname(), port), u.Hostname(), nil
	if cp.CACertFile != "" {
		if up.CAPEM, err = os.ReadFile(cp.CACertFile); err != nil {
			return cached, exitcode.FromIO(fmt.Errorf("--ca-cert-file: %w", errtext.PathCause(err)))
		}
	}
	return up, nil
}

// Servable is c's snapshot if Envoy may be started on it with the relay on
// socketPath, or why not. The cached bootstrap holds work-dir paths (the
// relay and admin sockets, the FIFO), so a cache made in another work dir
// (a temporary one, say) is not served.
func Servable(c *lkgcache.Cache, socketPath string) (*lkgcache.Snapshot, error) {
	snap, err := c.Usable()
	if err == nil && !bytes.Contains(snap.Bootstrap, []byte(socketPath)) {
		err = fmt.Errorf("it was made in another work dir than %s (give the zone proxy a fixed --work-dir)", filepath.Dir(socketPath))
	}
	return snap, err
}
