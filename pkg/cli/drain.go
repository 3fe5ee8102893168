package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// maintenanceFlags find the running instance and its readiness port;
// drain-time bounds the wait.
var maintenanceFlags = []config.Key{config.KeyConfig, config.KeyWorkDir, config.KeyReadinessPort, config.KeyDrainTime}

// undrainWait bounds an undrain: a new Envoy has to start and go LIVE.
const undrainWait = time.Minute

func newDrainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Take the running zone proxy out of rotation without stopping it (maintenance)",
		Long: `drain asks the running zoneproxy of this configuration (the one locking its
--work-dir or, without one, started with the same --config file) to fail
Envoy's health checks and drain its listeners, as a stop does, but to keep
Envoy and the agent running. It waits until /ready says DRAINED: the drain is
over and Envoy accepts no new connection. "zoneproxy undrain", or a stop,
ends it. SIGUSR2 to the agent drains too.

Exit codes: 0 drained (or already); 1 no running instance, it did not answer,
it is not serving yet, or it was not drained within --drain-time plus 30s;
64 a command line zoneproxy cannot parse; 78 an invalid configuration.`,
		Example: `  zoneproxy drain --config /etc/zoneproxy/payments-egress.yaml`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return maintain(cmd, true)
		},
	}
	addFlags(cmd.Flags(), maintenanceFlags...)
	addInstanceFlags(cmd.Flags())
	return cmd
}

func newUndrainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "undrain",
		Short: "Put a drained zone proxy back into rotation",
		Long: `undrain asks the running zoneproxy of this configuration to serve again after
"zoneproxy drain" or SIGUSR2. A drained Envoy never opens its listeners
again, so the agent restarts Envoy in place from the same bootstrap (its
configuration comes from the control plane, or from the last-known-good
cache while the control plane is unreachable). It waits until /ready says
READY again, or NO_ZONE_LISTENER for a proxy still waiting for its zone
listener from the control plane, as before the drain.

Exit codes: 0 serving (or never drained); 1 no running instance, it did not
answer, or it was not serving again within a minute; 64 a command line
zoneproxy cannot parse; 78 an invalid configuration.`,
		Example: `  zoneproxy undrain --config /etc/zoneproxy/payments-egress.yaml`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return maintain(cmd, false)
		},
	}
	addFlags(cmd.Flags(), maintenanceFlags...)
	addInstanceFlags(cmd.Flags())
	return cmd
}

// errMaintenance is a drain or undrain that did not happen; a retry may do.
type errMaintenance struct{ msg string }

func (e errMaintenance) Error() string { return e.msg }

// prepareRunning loads the configuration of a command that asks the
// running instance (--instance or the config's), and the way it fails:
// exit 1, as a retry may do.
func prepareRunning(cmd *cobra.Command) (*prepared, func(format string, args ...any) error, error) {
	name, err := useInstance(cmd.Flags())
	if err != nil {
		return nil, nil, err
	}
	if name != "" {
		// Outside systemd (no such unit) the instance's own files decide.
		_, _ = useUnitDirectories(cmd.Context(), name)
	}
	p, err := prepare(cmd, func(*config.Config, *source) ([]config.Warning, error) { return nil, nil })
	if err != nil {
		return nil, nil, err
	}
	stderr := cmd.ErrOrStderr()
	fail := func(format string, args ...any) error {
		err := errMaintenance{fmt.Sprintf(format, args...)}
		fmt.Fprintln(stderr, "zoneproxy: "+err.Error())
		return reportedError{err}
	}
	return p, fail, nil
}

func maintain(cmd *cobra.Command, drain bool) error {
	p, fail, err := prepareRunning(cmd)
	if err != nil {
		return err
	}
	defer func() { _ = p.log.Sync() }()
	out := cmd.OutOrStdout()
	what := "drain"
	if !drain {
		what = "undrain"
	}
	defer loopback.CloseIdleConnections()
	in := findInstance(p.cfg, p.configFile)
	if in == nil {
		return fail("no running zoneproxy for this configuration (%s): nothing to %s; is it started, and with the same %s or %s?", instanceKey(p.cfg, p.configFile), what, config.KeyConfig.Flag(), config.KeyWorkDir.Flag())
	}
	port := preflight.ReadinessPort(p.cfg)
	if !in.holds(port) {
		return fail("zoneproxy (pid %d) does not listen on %s: give the %s it runs with", in.pid, port.Addr, config.KeyReadinessPort.Flag())
	}
	base := "http://" + port.Addr
	ctx := context.Background()
	code, body, err := call(ctx, http.MethodPost, base+"/"+what)
	switch {
	case err != nil:
		return fail("zoneproxy (pid %d) did not answer on %s: %v", in.pid, port.Addr, err)
	case code == http.StatusConflict:
		return fail("zoneproxy (pid %d) cannot drain: %s", in.pid, strings.TrimSpace(body))
	case code != http.StatusAccepted:
		return fail("zoneproxy (pid %d) answered %d to POST /%s: %s", in.pid, code, what, strings.TrimSpace(body))
	}
	want, wait := []state.Phase{state.Drained}, p.cfg.DrainTime+30*time.Second
	if !drain {
		want, wait = undrained, undrainWait
	}
	if drain {
		fmt.Fprintf(out, "zoneproxy (pid %d): draining; health checks fail, connections drain (up to %s)\n", in.pid, p.cfg.DrainTime)
	} else {
		fmt.Fprintf(out, "zoneproxy (pid %d): undraining; Envoy restarts if it was drained\n", in.pid)
	}
	word, detail, err := awaitPhase(ctx, base, wait, want...)
	if err != nil {
		return fail("zoneproxy (pid %d) is %s after %s, not %s: %s", in.pid, word, wait, phaseList(want), detail)
	}
	switch {
	case drain:
		fmt.Fprintf(out, "zoneproxy (pid %d): DRAINED: %s\n", in.pid, detail)
	case word == string(state.Ready):
		fmt.Fprintf(out, "zoneproxy (pid %d): READY: serving again\n", in.pid)
	default:
		fmt.Fprintf(out, "zoneproxy (pid %d): %s: undrained; %s\n", in.pid, word, detail)
	}
	return nil
}

// undrained are the phases of a proxy back in rotation: NO_ZONE_LISTENER
// is as serving as it was before the drain, waiting for the control
// plane's listener.
var undrained = []state.Phase{state.Ready, state.NoZoneListener}

func phaseList(ps []state.Phase) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, " or ")
}

// instanceKey names how the instance was looked for.
func instanceKey(cfg *config.Config, configFile string) string {
	if cfg.WorkDir != "" {
		return config.KeyWorkDir.Flag() + " " + cfg.WorkDir
	}
	if configFile != "" {
		return config.KeyConfig.Flag() + " " + configFile
	}
	return "neither " + config.KeyConfig.Flag() + " nor " + config.KeyWorkDir.Flag() + " given"
}

// awaitPhase polls /ready until its first word is one of want. It returns
// the last word and detail seen.
func awaitPhase(ctx context.Context, base string, wait time.Duration, want ...state.Phase) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	word, detail := "no answer", ""
	for {
		if _, body, err := call(ctx, http.MethodGet, base+"/ready"); err == nil {
			word, detail, _ = strings.Cut(strings.TrimSpace(body), "\n")
			if slices.Contains(want, state.Phase(word)) {
				return word, detail, nil
			}
		}
		select {
		case <-ctx.Done():
			return word, detail, ctx.Err()
		case <-tick.C:
		}
	}
}

// loopback is the client of the agent's loopback server, one for the
// whole command: its /ready polls reuse the kept-alive connection.
var loopback = &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{}).DialContext}}

func call(ctx context.Context, method, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := loopback.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, "", err
	}
	return resp.StatusCode, string(b), nil
}
