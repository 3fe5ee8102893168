package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

func newCheckCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Preflight: check configuration, Envoy, ports, token and the control plane without starting anything",
		Long: `check runs every check "run" would, and asks the control plane for a bootstrap
whose answer is discarded (a proxy is only registered once Envoy connects),
without starting Envoy. It prints a checklist with a fix for each failure and
exits 0 only if everything passes. It takes the same flags and config as run.

Next to a running instance of the same configuration (the one locking its
--work-dir or, without one, started with the same --config file), the ports
that instance holds are noted as in use by it rather than failed.

--instance NAME checks the unit zoneproxy@NAME's configuration: its
NAME.yaml and the variables of its NAME.env, not the caller's.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, err := useInstance(cmd.Flags())
			if err != nil {
				return err
			}
			var unit *unitCheck
			if name != "" {
				unit = instanceUnit(cmd.Context(), name)
			}
			p, err := prepare(cmd, fullCheck)
			if err != nil {
				return err
			}
			defer func() { _ = p.log.Sync() }()
			if unit != nil {
				unit.configFile = p.configFile
			}
			return runChecks(cmd.Context(), cmd.OutOrStdout(), p.cfg, findInstance(p.cfg, p.configFile), unit)
		},
	}
	addFlags(cmd.Flags(), runFlags...)
	addInstanceFlags(cmd.Flags())
	return cmd
}

type checklist struct {
	w      io.Writer
	failed int
}

func (c *checklist) ok(what string, args ...any) {
	fmt.Fprintf(c.w, "[ ok ] %s\n", fmt.Sprintf(what, args...))
}

// note is advice that fails nothing.
func (c *checklist) note(what string, args ...any) {
	fmt.Fprintf(c.w, "[note] %s\n", fmt.Sprintf(what, args...))
}

func (c *checklist) fail(what string, err error) {
	c.failed++
	fmt.Fprintf(c.w, "[FAIL] %s\n", what)
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.TrimSpace(line) != "" {
			fmt.Fprintf(c.w, "       %s\n", strings.TrimSpace(line))
		}
	}
}

// runChecks prints the checklist; running is this configuration's agent
// if one runs (nil otherwise).
func runChecks(ctx context.Context, w io.Writer, cfg *config.Config, running *instance, unit *unitCheck) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c := &checklist{w: w}
	fmt.Fprintf(w, "zoneproxy check: mesh %q, role %s, Dataplane %q\n", cfg.Mesh, cfg.Role, cfg.Name)
	c.ok("configuration is valid")
	if cfg.AddressChosen != "" {
		c.note("address %s: %s (set %s to choose another)", cfg.Address, cfg.AddressChosen, config.KeyAddress.Flag())
	}

	if bin, err := exec.LookPath(cfg.EnvoyBinary); err == nil && geteuid() == 0 {
		if who := replaceableBy(bin); who != "" {
			c.fail("Envoy binary "+bin+" can be replaced by another user than root", fmt.Errorf("%s, and root runs it (zoneproxy check, an upgrade): make it and every directory above it root's and not writable by others (chown root:root, chmod go-w)", who))
		}
	}
	found, err := preflight.Envoy(probeAsUnitUser(ctx, unit), cfg.EnvoyBinary, cfg.StateDir)
	ev := found.Version
	cached := ""
	if found.Cached {
		cached = " (as run recorded it in " + config.KeyStateDir.Flag() + ")"
	}
	switch {
	case err != nil:
		c.fail("Envoy binary", err)
	case found.Unread != nil:
		c.ok("Envoy binary %s found (version unreadable: %v)", cfg.EnvoyBinary, found.Unread)
	case !version.EnvoyCompatible(ev.Version):
		c.ok("Envoy binary %s found, version %s%s", cfg.EnvoyBinary, ev.Version, cached)
		c.note("Envoy %s is not a version the supported Kuma releases are built with (%s); it may work, and the control plane shows it as incompatible", ev.Version, version.ExpectedEnvoy())
	default:
		c.ok("Envoy binary %s found, version %s%s", cfg.EnvoyBinary, ev.Version, cached)
	}
	switch clock := timesync.Check(); {
	case clock.Synced:
		c.ok("the system clock is synchronised")
	default:
		c.note("%s: tokens and certificates may look expired or not yet valid until it is; zoneproxy keeps retrying meanwhile", strings.TrimSuffix(clock.Problem(), "."))
	}

	if desc, err := agent.CheckWorkDir(cfg.WorkDir); err != nil {
		c.fail("work dir", err)
	} else {
		c.ok("work dir %s", desc)
	}
	c.checkPorts(append(preflight.AgentPorts(cfg), preflight.Ports(cfg)...), running)

	tokenless := cfg.DataplaneToken == "" && cfg.DataplaneTokenFile == ""
	if !tokenless {
		c.checkToken(cfg)
	}
	c.checkCAFile(cfg, time.Now(), timesync.Check)
	if unit != nil {
		c.checkUnitOf(ctx, cfg, unit)
	}
	cpErr := c.checkControlPlane(ctx, cfg, ev, tokenless)
	if tokenless {
		// After the control plane: only its answer tells whether it needs one.
		c.checkNoToken(cfg, cpErr)
	}
	c.checkCache(cfg, time.Now())
	var phase state.Phase // the running instance's, "" for none
	if running != nil {
		phase = c.checkRunning(ctx, cfg, running)
	}
	for _, l := range cfg.Dataplane().Networking.Listeners {
		c.note("after start, /ready says NO_ZONE_LISTENER until the control plane sends %s: %s", l.EnvoyListenerName(), listenwatch.ZoneListenerCondition(l.Type))
	}
	if note := statusNote(cfg.Role, phase); note != "" {
		c.note("this ingress is not serving yet: %s", note)
	}

	if c.failed > 0 {
		fmt.Fprintf(w, "%d check(s) failed\n", c.failed)
		return reportedError{exitcode.AsConfig(fmt.Errorf("%d check(s) failed", c.failed))}
	}
	fmt.Fprintln(w, "all checks passed")
	return nil
}

// checkRunning reports what the running instance of this configuration
// says of itself: its phase and what the control plane makes of it.
// checkRunning notes what the running instance says of itself, and
// returns its phase ("" when it does not say).
func (c *checklist) checkRunning(ctx context.Context, cfg *config.Config, running *instance) state.Phase {
	_, body, err := call(ctx, http.MethodGet, "http://"+preflight.ReadinessPort(cfg).Addr+"/status")
	var st agent.Status
	if err == nil {
		err = json.Unmarshal([]byte(body), &st)
	}
	if err != nil {
		c.note("the running instance (pid %d) does not say how it is: %v", running.pid, err)
		return ""
	}
	c.note("the running instance (pid %d) is %s since %s: %s", running.pid, st.Phase, st.Since.UTC().Format(time.RFC3339), st.Detail)
	if st.ControlPlane.State != "" {
		c.note("the control plane's view of it (%s): %s", st.ControlPlane.State, st.ControlPlane.Says)
	}
	return state.Phase(st.Phase)
}

// checkPorts binds each port; one that the running instance of this
// configuration holds is noted, not failed.
func (c *checklist) checkPorts(ports []preflight.Port, running *instance) {
	var free, held []string
	var busy []error // one line each under the [FAIL]
	for _, p := range ports {
		switch err := bindOnce(p); {
		case err == nil:
			free = append(free, p.Addr)
		case running != nil && running.holds(p):
			held = append(held, p.Addr)
		default:
			busy = append(busy, err)
		}
	}
	if len(busy) > 0 {
		c.fail("ports are free", errors.Join(busy...))
	} else if len(free) > 0 {
		c.ok("ports are free: %s", strings.Join(free, ", "))
	}
	if len(held) > 0 {
		c.note("ports in use by zoneproxy (pid %d, this config): %s", running.pid, strings.Join(held, ", "))
	}
}

// bindOnce binds and releases p; its error is one port's own sentence
// (CheckFree's would come as a list of one).
func bindOnce(p preflight.Port) error {
	l, err := preflight.Listen(p.Addr)
	if err != nil {
		return preflight.PortError(p, err)
	}
	return l.Close()
}

// checkToken describes the configured token.
func (c *checklist) checkToken(cfg *config.Config) {
	tok, err := token.Load(cfg.DataplaneToken, cfg.DataplaneTokenFile)
	if err != nil {
		c.fail("dataplane token", err)
		return
	}
	claims := tok.Claims
	// config validation already refused a token that cannot work.
	desc := "mesh-wide"
	if claims.Mesh != "" {
		desc = fmt.Sprintf("for mesh %q", claims.Mesh)
	}
	if claims.Workload != "" {
		desc += fmt.Sprintf(", workload %q", claims.Workload)
	}
	if claims.ExpiresAt != nil {
		desc += ", expires " + claims.ExpiresAt.UTC().Format(time.RFC3339)
	}
	c.ok("dataplane token is a JWT %s", desc)
}

// checkCAFile says until when --ca-cert-file's CA certificate is valid;
// one expired or not valid yet fails, named with its dates, so that it is
// not taken for the control plane's own certificate. (Expired on a
// synchronised clock, validation refused it already.)
func (c *checklist) checkCAFile(cfg *config.Config, now time.Time, clock timesync.Checker) {
	if cfg.CACertFile == "" {
		return
	}
	ca, err := config.ReadCAFile(cfg.CACertFile)
	if err != nil {
		c.fail("CA certificate file "+errtext.Value(cfg.CACertFile), fmt.Errorf("cannot read it: %v", errtext.PathCause(err)))
		return
	}
	if te := ca.Time(now); te != nil {
		what := "renew it: give the control plane's current CA certificate"
		if te.NotYetValid {
			what = "run would keep retrying until it is valid"
		}
		if p := clock().Problem(); p != "" {
			what = strings.TrimSuffix(p, ".") + ": the clock may be what is wrong; run would keep retrying"
		}
		c.fail("CA certificate file "+errtext.Value(cfg.CACertFile)+" is valid now", fmt.Errorf("%s: %v\n(%s)", config.KeyCACertFile.Flag(), te, what))
		return
	}
	var until time.Time
	name := ""
	for _, cert := range ca.Certs {
		if config.CertTime(cert, now) == nil && cert.NotAfter.After(until) {
			until, name = cert.NotAfter, config.CertName(cert)
		}
	}
	if !until.IsZero() {
		c.ok("CA certificate file %s: CA certificate %s valid until %s", errtext.Value(cfg.CACertFile), name, until.UTC().Format(time.RFC3339))
	}
}

// tokenRequired is kuma-cp's answer to a request without a token when its
// dataplane authentication is on (pkg/kuma/bootstrap classifies it by the
// same text).
const tokenRequired = "Dataplane Token is required"

// refusedForNoToken: err is the control plane requiring a token.
func refusedForNoToken(err error) bool {
	var be *bootstrap.Error
	return errors.As(err, &be) && be.Status == 422 && strings.HasPrefix(be.Body, tokenRequired)
}

// checkNoToken gives the verdict on running without a token from the
// control plane's answer: one verdict, whichever line says it.
func (c *checklist) checkNoToken(cfg *config.Config, cpErr error) {
	switch {
	case cpErr == nil:
		c.ok("no dataplane token configured, and the control plane accepts this proxy without one (its dataplane authentication is off)")
	case refusedForNoToken(cpErr):
		c.fail("dataplane token configured", fmt.Errorf("none is, and the control plane requires one: generate one with `kumactl generate dataplane-token --mesh %s --workload %s` and pass it with %s",
			errtext.Arg(cfg.Mesh), errtext.Arg(cfg.Workload), config.KeyDataplaneTokenFile.Flag()))
	default:
		c.note("no dataplane token configured: this works only if the control plane's dataplane authentication is off, which its answer above does not tell")
	}
}

// checkControlPlane asks for a bootstrap and returns the answer's error.
// Without a token, a refusal for the want of one is left to checkNoToken.
func (c *checklist) checkControlPlane(ctx context.Context, cfg *config.Config, ev envoy.Version, tokenless bool) error {
	_, err := fetchOnce(ctx, cfg, ev)
	var setup setupError
	if errors.As(err, &setup) {
		c.fail("control plane", setup.err)
		return err
	}
	tlsNote := "TLS verified with the system trust store"
	if cfg.CACertFile != "" {
		tlsNote = "TLS verified with " + cfg.CACertFile
	}
	switch kind := bootstrap.KindOf(err); {
	case tokenless && refusedForNoToken(err):
		c.ok("control plane %s reachable, %s", cfg.CPAddress, tlsNote)
	case err == nil:
		c.ok("control plane %s reachable, %s", cfg.CPAddress, tlsNote)
		c.ok("mesh %q exists and the control plane accepts this Dataplane", cfg.Mesh)
	case kind == bootstrap.MeshNotFound:
		c.ok("control plane %s reachable, %s", cfg.CPAddress, tlsNote)
		c.fail(fmt.Sprintf("mesh %q exists", cfg.Mesh), err)
	case kind == bootstrap.Local:
		c.fail("dataplane token file", err)
	case kind == bootstrap.Retryable:
		c.fail(fmt.Sprintf("control plane %s reachable", cfg.CPAddress), fmt.Errorf("%v\n(run would keep retrying; check the address, the port (5678) and firewalls)", err))
	default:
		c.fail(fmt.Sprintf("control plane %s accepts this zone proxy", cfg.CPAddress), err)
	}
	return err
}

// checkCache reports the last-known-good configuration run would serve
// while the control plane is unreachable. It fails nothing: without a
// usable cache run still works, it only cannot start during an outage.
func (c *checklist) checkCache(cfg *config.Config, now time.Time) {
	switch {
	case !cfg.XDSRelay:
		c.note("no configuration is cached: %s=false (Envoy talks to the control plane directly)", config.KeyXDSRelay.Flag())
		return
	case cfg.StateDir == "":
		c.note(`no configuration is cached: %s is ""`, config.KeyStateDir.Flag())
		return
	}
	// As the agent keys its cache.
	st := xds.InspectCache(cfg, now)
	if !st.Present {
		if _, err := os.Stat(st.Path); !errors.Is(err, fs.ErrNotExist) {
			c.note("cannot read the cached configuration: %s", st.Problem)
			return
		}
		hint := ""
		if !cfg.StateDirSet && os.Getenv("STATE_DIRECTORY") == "" {
			// Outside the unit the default is not the unit's directory.
			hint = "; a systemd instance keeps it in /var/lib/zoneproxy/<instance>: pass " + config.KeyStateDir.Flag() + " to check that one"
		}
		c.note("no cached configuration in %s yet: run keeps one once Envoy has accepted the control plane's configuration%s", st.Path, hint)
		return
	}
	if st.WrittenAt.IsZero() { // damaged: nothing else could be read
		c.note("cached configuration in %s would not be served: %s", st.Path, st.Problem)
		return
	}
	desc := fmt.Sprintf("cached configuration in %s: %d resources from %s (%s old)", st.Path, st.Resources,
		st.WrittenAt.UTC().Format(time.RFC3339), st.Age.Round(time.Second))
	if st.IdentityMatch {
		desc += ", made for this proxy"
	} else {
		desc += fmt.Sprintf(", made for mesh %q, name %q, role %s, control plane %s", st.Identity.Mesh, st.Identity.Name, st.Identity.Role, st.Identity.ControlPlane)
	}
	if st.EarliestNotAfter.IsZero() {
		desc += ", no certificate in it"
	} else {
		desc += ", earliest certificate expiry " + st.EarliestNotAfter.UTC().Format(time.RFC3339)
	}
	if st.Problem != "" {
		c.note("%s; it would not be served: %s", desc, st.Problem)
		return
	}
	c.ok("%s; served only while the control plane is unreachable", desc)
}
