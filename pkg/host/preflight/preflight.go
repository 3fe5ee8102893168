// Package preflight holds the checks that run before anything is sent to
// the control plane; `zoneproxy run` and `zoneproxy check` share them, and
// so share their messages.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/hashicorp/go-multierror"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// Port is one port the zone proxy needs.
type Port struct {
	Flag string
	Addr string
}

// controlPlaneAdminAddress is kuma-cp's default bootstrapServer.params.adminAddress.
const controlPlaneAdminAddress = "127.0.0.1"

// Ports lists what Envoy will bind: the zone listeners, and the admin
// port the control plane exposes on --address when that is not loopback.
func Ports(cfg *config.Config) []Port {
	var out []Port
	add := func(flag string, port int) {
		out = append(out, Port{flag, net.JoinHostPort(cfg.Address, strconv.Itoa(port))})
	}
	if cfg.Role.HasIngress() {
		add(string(config.KeyIngressPort), cfg.IngressPort)
	}
	if cfg.Role.HasEgress() {
		add(string(config.KeyEgressPort), cfg.EgressPort)
	}
	// kuma-cp compares the address with its admin address (127.0.0.1) as a
	// string: any other address, other loopback ones included, gets the
	// listener.
	if cfg.Address != controlPlaneAdminAddress {
		add(string(config.KeyAdminPort), cfg.AdminPort)
	}
	return out
}

// ReadinessPort is the agent's own loopback endpoint.
func ReadinessPort(cfg *config.Config) Port {
	return Port{string(config.KeyReadinessPort), net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.ReadinessPort))}
}

// MetricsPort is the extra /metrics listener, if --metrics-address asks
// for one.
func MetricsPort(cfg *config.Config) (Port, bool) {
	addr, ok := cfg.MetricsListener()
	return Port{string(config.KeyMetricsAddress), addr}, ok
}

// HealthPort is the load balancers' /ready listener, if --health-address
// asks for one.
func HealthPort(cfg *config.Config) (Port, bool) {
	addr, ok := cfg.HealthListener()
	return Port{string(config.KeyHealthAddress), addr}, ok
}

// AgentPorts are the agent's own listeners: readiness, and metrics and
// health when asked for.
func AgentPorts(cfg *config.Config) []Port {
	ports := []Port{ReadinessPort(cfg)}
	if mp, ok := MetricsPort(cfg); ok {
		ports = append(ports, mp)
	}
	if hp, ok := HealthPort(cfg); ok {
		ports = append(ports, hp)
	}
	return ports
}

// CheckFree binds and releases each port, reporting every one in use:
// Envoy would only fail on them much later, as a rejected listener.
func CheckFree(ports ...Port) error {
	var errs *multierror.Error
	for _, p := range ports {
		l, err := Listen(p.Addr)
		if err != nil {
			errs = multierror.Append(errs, PortError(p, err))
			continue
		}
		l.Close()
	}
	return errs.ErrorOrNil()
}

// plainTCP listens without Multipath TCP, which Go uses by default where
// the kernel has it: Envoy binds plain TCP, so a port is checked the same
// way, and a loopback endpoint gains nothing from MPTCP but a costlier
// socket (the first one also probes the kernel for it).
var plainTCP = func() *net.ListenConfig {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return &lc
}()

// Listen binds a plain TCP listener on addr.
func Listen(addr string) (net.Listener, error) {
	return plainTCP.Listen(context.Background(), "tcp", addr)
}

// PortError explains a failed bind and names the flag to change.
func PortError(p Port, err error) error {
	var cause error = err
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		cause = oe.Err
	}
	hint := "free the port or set --" + p.Flag + " to another one"
	if k := config.Key(p.Flag); k != config.KeyReadinessPort && k != config.KeyMetricsAddress && k != config.KeyHealthAddress {
		hint += " (and check " + config.KeyAddress.Flag() + " is an IP of this host)"
	}
	switch {
	case errors.Is(cause, syscall.EADDRNOTAVAIL):
		hint += "; a restart tries again, as the address may not be up yet (a VIP, an IPv6 address still tentative)"
	case errors.Is(cause, syscall.EADDRINUSE):
		hint += "; " + holderOf(p.Addr) + "; a restart tries again, as the port may be freed"
	}
	return fmt.Errorf("cannot bind %s for --%s (%w): %s", p.Addr, p.Flag, cause, hint)
}

// AddressNotUpYet reports whether a bind failed because the address is not
// (yet) on this host.
func AddressNotUpYet(err error) bool { return errors.Is(err, syscall.EADDRNOTAVAIL) }

// PortInUse reports whether a bind failed because something else holds
// the port.
func PortInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

// Transient reports whether a restart may get past every failed bind in
// err (one PortError, or CheckFree's list of them): a port in use, which
// its holder may free (a squatter that took the port before the agent
// must not stop it for good, nor stand in for it), or an address not on
// this host yet. A port refused for want of the capability (permission
// denied) is the configuration's to fix, and decides for the whole list.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	errs := []error{err}
	var merr *multierror.Error
	if errors.As(err, &merr) {
		errs = merr.Errors
	}
	for _, e := range errs {
		if !PortInUse(e) && !AddressNotUpYet(e) {
			return false
		}
	}
	return len(errs) > 0
}

// FoundEnvoy is the Envoy binary and what is known of its version.
type FoundEnvoy struct {
	Path    string
	Version envoy.Version
	// Cached says the version came from the state dir's version cache:
	// `--version` did not run.
	Cached bool
	// Unread is why a version that `--version` printed could not be parsed
	// (Version is then "unknown"): a warning, not a failure.
	Unread error
}

// Envoy finds the binary and reads its version, from stateDir's version
// cache when `run` recorded it for this very binary. It never writes the
// cache: `check` may run as another user than the service, and a state dir
// or record it created could be unusable for the service.
func Envoy(ctx context.Context, name, stateDir string) (FoundEnvoy, error) {
	path, err := envoy.Locate(name)
	if err != nil {
		return FoundEnvoy{}, err
	}
	found, err := envoy.VersionCache{Dir: stateDir, ReadOnly: true}.Read(ctx, path)
	if err != nil {
		return FoundEnvoy{Path: path}, err
	}
	return FoundEnvoy{Path: path, Version: found.Version, Cached: found.Cached, Unread: found.Unread}, nil
}
