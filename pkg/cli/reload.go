package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
)

// reloadWait bounds the wait for the new program: its first answer comes
// within a second; a start-over (no Envoy yet) answers as soon as it
// listens.
const reloadWait = time.Minute

func newReloadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Replace the running agent with its binary on disk, without touching Envoy",
		Long: `reload asks the running zoneproxy of this configuration (found as "drain"
finds it) to replace itself in place: the binary it was started as (the new
one after a package upgrade) runs in the same process, with the same
arguments and environment, and takes over the running Envoy, its listeners,
sockets and access-log FIFO. Envoy never stops, and no connection is
dropped. The new binary first checks the configuration: if it cannot run
it, or cannot take over, the running agent refuses the reload, says why, and
goes on serving. While the agent waits for the mesh or the control plane
(no Envoy yet), the new program starts over. A drained or draining proxy,
or one that is stopping, refuses.

A new configuration that changes what the proxy is (its identity, address
and ports, --cp-address, --xds-relay, --work-dir) is refused, naming the
settings: restart to apply it. Once the control plane's stream is back, a
new Envoy takes over beside the running one, dropping no connection, when
the Envoy this program would start differs: another build of
--envoy-binary, a changed Envoy launch (--envoy-binary, --envoy-arg,
--concurrency, Envoy's log levels) or another bootstrap from the control
plane. A reload applies the rest in the agent (its log level, the token
file, the drain times, …).

systemctl reload zoneproxy@NAME runs this command; SIGHUP does the same
under systemd.

Exit codes: 0 the new program serves; 75 the agent refused the reload on
purpose and goes on serving unchanged (drained or draining, stopping,
Envoy starting, an identity change, a new binary or configuration that
cannot take over: the message says why; a restart would undo what the
refusal keeps); 69 the running agent cannot reload at all (no running
instance, it did not answer, it is too old to reload, the new program
reads another handover version, or the replacement failed): restart it to
bring in the new binary; 64 a command line zoneproxy cannot parse; 78 an
invalid configuration. A package upgrade restarts an instance on 69 only.`,
		Example: `  zoneproxy reload --config /etc/zoneproxy/payments-egress.yaml
  zoneproxy reload --instance payments-egress`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return reload(cmd)
		},
	}
	addFlags(cmd.Flags(), config.KeyConfig, config.KeyWorkDir, config.KeyReadinessPort)
	addInstanceFlags(cmd.Flags())
	cmd.Flags().Int("pid", 0, "the agent's process ID, when it cannot be found by its configuration: the unit's ExecReload= passes $MAINPID, as ProtectProc=invisible hides the agent's /proc from it")
	return cmd
}

func reload(cmd *cobra.Command) error {
	p, fail, err := prepareRunning(cmd)
	if err != nil {
		return err
	}
	defer func() { _ = p.log.Sync() }()
	// A package upgrade restarts an instance only when it cannot reload
	// at all; one refused on purpose (drained, starting, …) is left.
	cannot := func(format string, args ...any) error {
		return exitcode.WithCode(fail(format, args...), exitcode.CannotReload)
	}
	refused := func(format string, args ...any) error {
		return exitcode.WithCode(fail(format, args...), exitcode.ReloadRefused)
	}
	out := cmd.OutOrStdout()
	defer loopback.CloseIdleConnections()
	in := findInstance(p.cfg, p.configFile)
	if pid, _ := cmd.Flags().GetInt("pid"); in == nil && pid > 0 {
		in = &instance{pid: pid} // its ports unknown: the readiness port answers for it
	}
	if in == nil {
		return cannot("no running zoneproxy for this configuration (%s): nothing to reload; is it started, and with the same %s or %s?", instanceKey(p.cfg, p.configFile), config.KeyConfig.Flag(), config.KeyWorkDir.Flag())
	}
	port := preflight.ReadinessPort(p.cfg)
	if !in.holds(port) {
		return cannot("zoneproxy (pid %d) does not listen on %s: give the %s it runs with", in.pid, port.Addr, config.KeyReadinessPort.Flag())
	}
	base := "http://" + port.Addr
	ctx := context.Background()
	before, err := agentStatus(ctx, base)
	if err != nil {
		return cannot("zoneproxy (pid %d) did not answer on %s: %v", in.pid, port.Addr, err)
	}
	asked := time.Now()
	code, body, err := call(ctx, http.MethodPost, base+"/reload")
	switch {
	case err != nil:
		return cannot("zoneproxy (pid %d) did not answer POST /reload on %s: %v", in.pid, port.Addr, err)
	case code == http.StatusConflict:
		return refused("zoneproxy (pid %d, generation %d) did not reload and goes on serving: %s", in.pid, before.Generation, strings.TrimSpace(body))
	case code == http.StatusNotImplemented:
		return cannot("zoneproxy (pid %d, generation %d) cannot reload to the new program and goes on serving: %s", in.pid, before.Generation, strings.TrimSpace(body))
	case code == http.StatusNotFound:
		return cannot("zoneproxy (pid %d) cannot reload (an older version?): restart it instead", in.pid)
	case code != http.StatusAccepted:
		return cannot("zoneproxy (pid %d) answered %d to POST /reload: %s", in.pid, code, strings.TrimSpace(body))
	}
	fmt.Fprintf(out, "zoneproxy (pid %d): reloading generation %d in place; Envoy keeps running\n", in.pid, before.Generation)
	// With an Envoy to take over, the new program is done once it
	// supervises that Envoy: until then /status names none.
	takesOverEnvoy := before.Envoy != nil && before.Envoy.PID > 0
	wctx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := agentStatus(wctx, base)
		switch {
		case err != nil:
		case st.Generation > before.Generation && (st.Envoy != nil || !takesOverEnvoy):
			fmt.Fprintf(out, "zoneproxy (pid %d): generation %d %s (%s): %s\n", in.pid, st.Generation, st.Phase, envoyWords(st), st.Detail)
			return nil
		case st.Reload != nil && st.Reload.Result == "refused" && !st.Reload.At.Before(asked):
			return refused("zoneproxy (pid %d, generation %d) did not reload and goes on serving: %s", in.pid, st.Generation, st.Reload.Error)
		case st.Reload != nil && st.Reload.Result != "ok" && !st.Reload.At.Before(asked):
			return cannot("zoneproxy (pid %d, generation %d) did not reload and goes on serving: %s", in.pid, st.Generation, st.Reload.Error)
		}
		if err != nil && syscall.Kill(in.pid, 0) == syscall.ESRCH {
			return cannot("zoneproxy (pid %d) ended during the reload (with its Envoy); see its log (journalctl -u zoneproxy@…); its supervisor restarts it", in.pid)
		}
		select {
		case <-wctx.Done():
			return cannot("zoneproxy (pid %d) shows no new generation serving after %s; see its log (journalctl -u zoneproxy@…)", in.pid, reloadWait)
		case <-tick.C:
		}
	}
}

func envoyWords(st agent.Status) string {
	if st.Envoy == nil {
		return "no Envoy yet"
	}
	return fmt.Sprintf("Envoy pid %d, generation %d", st.Envoy.PID, st.EnvoyGeneration)
}

func agentStatus(ctx context.Context, base string) (agent.Status, error) {
	var st agent.Status
	code, body, err := call(ctx, http.MethodGet, base+"/status")
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("/status answered %d", code)
	}
	return st, json.Unmarshal([]byte(body), &st)
}
