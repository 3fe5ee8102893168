package cli

import (
	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
)

func newRunCommand() *cobra.Command {
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
(SIGHUP ignored at start) SIGHUP stays ignored.

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
			p, err := prepare(cmd, fullCheck)
			if err != nil {
				return err
			}
			defer func() { _ = p.log.Sync() }()
			ag := agent.New(agent.Options{Config: p.cfg, Log: p.log, LogLevel: p.logLevel, Signals: sigs})
			if err := ag.Run(cmd.Context()); err != nil {
				return reportedError{err} // the agent logged it
			}
			return nil
		},
	}
	addFlags(cmd.Flags(), runFlags...)
	return cmd
}
