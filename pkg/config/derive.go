package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
)

// Host is what defaults are derived from; tests pass their own.
type Host struct {
	Hostname         string
	FirstIPv4        string                           // the default address, "" if none
	lookupIPv4       func() (address, because string) // finds the default address when needed
	RuntimeDirectory string                           // $RUNTIME_DIRECTORY, set by systemd
	UserRuntimeDir   string                           // /run as root, else $XDG_RUNTIME_DIR ("" if unset)
	StateDirectory   string                           // $STATE_DIRECTORY, set by systemd
	XDGStateHome     string                           // $XDG_STATE_HOME, else ~/.local/state
}

// LocalHost reads the running machine.
func LocalHost() Host {
	h, _ := os.Hostname()
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" {
		if home, err := os.UserHomeDir(); err == nil {
			state = filepath.Join(home, ".local", "state")
		}
	}
	// systemd lists several directories separated by ":" when the unit
	// names several; the first is this instance's.
	stateDir, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":")
	runtime := os.Getenv("XDG_RUNTIME_DIR")
	if os.Geteuid() == 0 {
		runtime = "/run"
	}
	return Host{Hostname: h, lookupIPv4: defaultAddress, RuntimeDirectory: os.Getenv("RUNTIME_DIRECTORY"),
		UserRuntimeDir: runtime, StateDirectory: stateDir, XDGStateHome: state}
}

// defaultAddress is the IPv4 address of the interface the default route
// leaves through (the lowest metric in /proc/net/route), the source address
// other hosts see; without a default route, the first one up in interface
// order. Interface order alone is a guess on a host with several NICs.
func defaultAddress() (string, string) {
	if route, err := os.ReadFile("/proc/net/route"); err == nil {
		if name := defaultRouteInterface(string(route)); name != "" {
			if ifc, err := net.InterfaceByName(name); err == nil {
				if ip := firstGlobalIPv4(ifc); ip != "" {
					return ip, "the address of " + name + ", the interface of the default route"
				}
			}
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", ""
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		if ip := firstGlobalIPv4(&ifc); ip != "" {
			return ip, "the first address of " + ifc.Name + ": there is no default route"
		}
	}
	return "", ""
}

// defaultRouteInterface reads /proc/net/route: the interface of the
// default route (destination and mask 0) with the lowest metric.
func defaultRouteInterface(table string) string {
	best, bestMetric := "", -1
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		var metric int
		if _, err := fmt.Sscan(f[6], &metric); err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	return best
}

func firstGlobalIPv4(ifc *net.Interface) string {
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip4 := ipn.IP.To4(); ip4 != nil && !ip4.IsLoopback() && !ip4.IsLinkLocalUnicast() {
				return ip4.String()
			}
		}
	}
	return ""
}

// Complete fills the derived defaults (name, workload, address, work dir
// from $RUNTIME_DIRECTORY). Values set by the user are kept as given.
func (c *Config) Complete(h Host) {
	short := strings.SplitN(h.Hostname, ".", 2)[0]
	if c.Name == "" && c.Mesh != "" && c.Role != "" {
		c.Name = keepingTail(dataplane.SanitizeName, 253, "zone-proxy-"+c.Mesh, fmt.Sprintf("-%s-%s", c.Role, short))
		c.derivedName = true
	}
	if c.Workload == "" && c.Mesh != "" && c.Role != "" {
		c.Workload = keepingTail(dataplane.SanitizeLabel, 63, "zone-proxy-"+c.Mesh, "-"+string(c.Role))
		c.derivedWorkload = true
	}
	if c.Address == "" {
		c.Address, c.AddressChosen = h.FirstIPv4, "the host's default"
		if c.Address == "" && h.lookupIPv4 != nil {
			c.Address, c.AddressChosen = h.lookupIPv4()
		}
	}
	if c.WorkDir == "" {
		c.WorkDir = h.RuntimeDirectory
	}
	if c.WorkDir == "" && h.UserRuntimeDir != "" && c.Name != "" {
		// One work dir per name that outlives a restart, so the cached
		// configuration (which names the work dir's sockets) can be served
		// by the next run; a temporary one could not be.
		c.WorkDir = perNameDir(filepath.Join(h.UserRuntimeDir, "zoneproxy"), c.Name)
	}
	if !c.StateDirSet {
		switch {
		case h.StateDirectory != "":
			c.StateDir = h.StateDirectory
		case h.XDGStateHome != "" && c.Name != "":
			c.StateDir = filepath.Join(h.XDGStateHome, "zoneproxy", c.Name)
		}
	}
	// Envoy runs in the work dir and, with reloadable tokens, reads the
	// token path the control plane hands back: relative paths would break.
	for _, p := range []*string{&c.DataplaneTokenFile, &c.CACertFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
}

// perNameDir is base/name, with a name too long for Envoy's socket paths
// cut and told apart from others by a hash of the whole.
func perNameDir(base, name string) string {
	dir := filepath.Join(base, name)
	if len(dir) <= MaxWorkDirLen {
		return dir
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:4])
	keep := max(MaxWorkDirLen-len(base)-1-len(suffix), 1)
	return filepath.Join(base, name[:min(keep, len(name))]+suffix)
}

// Dataplane renders the resource this configuration registers.
func (c *Config) Dataplane() dataplane.Dataplane {
	s := dataplane.Spec{
		Mesh:      c.Mesh,
		Name:      c.Name,
		Workload:  c.Workload,
		Labels:    c.Labels,
		Address:   c.Address,
		AdminPort: portOrZero(c.AdminPort),
	}
	if c.Role.HasIngress() {
		s.IngressPort = portOrZero(c.IngressPort)
	}
	if c.Role.HasEgress() {
		s.EgressPort = portOrZero(c.EgressPort)
	}
	return dataplane.Render(s)
}

// portOrZero keeps out-of-range values visible to validation as 0 (which
// the listener rules reject) instead of wrapping them.
func portOrZero(p int) uint32 {
	if p < 1 || p > 65535 {
		return 0
	}
	return uint32(p)
}

// keepingTail sanitizes head+tail within max, shortening head, not tail:
// the role (and host) must survive a long mesh name, or the ingress and
// egress of one mesh would share a name and a workload, the proxy's
// identity.
func keepingTail(sanitize func(string) string, max int, head, tail string) string {
	full := sanitize(head + tail) // cut at max, tail first
	t := sanitize(strings.TrimLeft(tail, "-"))
	if strings.HasSuffix(full, "-"+t) || t == "" || len(t)+1 >= max {
		return full
	}
	h := sanitize(head)
	if len(h) > max-len(t)-1 {
		h = strings.TrimRight(h[:max-len(t)-1], "-.")
	}
	return h + "-" + t
}
