package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade/inplace"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

func newRunCommand() *cobra.Command {
	var handoverCheck bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the zone proxy: bootstrap against the control plane and supervise Envoy",
		Long: `Run the zone proxy: bootstrap against the control plane (waiting while the
mesh does not exist or the control plane is unreachable), then start and
supervise Envoy until stopped.

Signals: SIGTERM, SIGINT (Ctrl-C) and SIGHUP (the terminal or ssh session
closing) all stop the zone proxy gracefully: health checks fail, listeners
drain for at least --drain-min and at most --drain-time, Envoy stops and the
work dir is cleaned. A second signal skips the rest of the drain. Under nohup
(SIGHUP ignored at start) SIGHUP stays ignored. Under systemd (NOTIFY_SOCKET
or INVOCATION_ID set) SIGHUP is a reload instead, as "zoneproxy reload":
the agent replaces itself in place and Envoy keeps running. SIGUSR2 drains
for maintenance, as "zoneproxy drain". SIGUSR1 stops it for a restart: a
zone egress stays in kuma-cp's egress set and drains only its connections
in flight; under systemd "systemctl restart" does so by itself (the agent
asks systemd over D-Bus what the unit's job is).

Exit codes: 0 clean stop; 1 a failure a restart may fix (Envoy died, a full
disk, --bootstrap-timeout); 64 a command line zoneproxy cannot parse (an
unknown flag, kuma-dp's among them); 78 a configuration problem or a
permanent refusal that a restart cannot fix.`,
		Example: `  zoneproxy run --mesh payments --role egress \
    --cp-address https://cp.zone-1.internal:5678 --ca-cert-file /etc/zoneproxy/cp-ca.pem \
    --dataplane-token-file /etc/zoneproxy/tokens/payments-egress`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// First of all: a signal during the configuration's loading
			// waits for the agent; SIGPIPE is ignored before any log line.
			sigs := agent.CatchSignals()
			// What a reload's previous program handed over, before the
			// environment is read: its variable is no setting.
			handover, herr := reexec.Take()
			if errors.Is(herr, reexec.ErrNotHandedOver) {
				herr = nil
			}
			if handoverCheck {
				return checkHandover(cmd)
			}
			p, err := prepare(cmd, fullCheck)
			if err != nil {
				return err
			}
			defer func() { _ = p.log.Sync() }()
			if herr != nil {
				// Envoy, if one was handed over, ends with this process:
				// systemd starts both anew.
				p.log.Error("failed: cannot take over from the previous agent: " + herr.Error())
				return reportedError{herr}
			}
			ag := agent.New(agent.Options{Config: p.cfg, Log: p.log, LogLevel: p.logLevel, Signals: sigs, Handover: handover})
			if err := ag.Run(cmd.Context()); err != nil {
				return reportedError{err} // the agent logged it
			}
			return nil
		},
	}
	addFlags(cmd.Flags(), runFlags...)
	// A reload runs the new binary with this flag first (pkg/upgrade/inplace/reload.go).
	cmd.Flags().BoolVar(&handoverCheck, upgrade.CheckFlag, false, "check the configuration and print what a reload could hand over, then exit")
	_ = cmd.Flags().MarkHidden(upgrade.CheckFlag)
	return cmd
}

// checkHandover is `run --handover-check`: the configuration loads and is
// valid, and this binary reads the handover the running agent writes.
func checkHandover(cmd *cobra.Command) error {
	p, err := prepare(cmd, fullCheck)
	if err != nil {
		return err
	}
	b, err := json.Marshal(upgrade.Check{Manifest: reexec.ManifestVersion, Handover: upgrade.Version,
		Version: version.Version, Envoy: inplace.EnvoyFixed(p.cfg)})
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), string(b))
	return nil
}
