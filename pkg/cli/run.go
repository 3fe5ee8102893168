package cli

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/sdnotify"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/pkg/localserver"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/version"
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
			sigs := listenForSignals()
			p, err := prepare(cmd, fullCheck)
			if err != nil {
				return err
			}
			defer func() { _ = p.log.Sync() }()
			return runAgent(p.cfg, p.log, p.logLevel, sigs)
		},
	}
	addFlags(cmd.Flags(), runFlags...)
	return cmd
}

// runningEnvoy lets the watchdog ask whether Envoy is alive and answering.
type runningEnvoy struct {
	admin *envoy.Admin
	proc  *envoy.Process
}

func (r *runningEnvoy) healthy(ctx context.Context) bool {
	if r == nil {
		return true // no Envoy yet: the agent itself is alive
	}
	if r.proc.State() == envoy.Exited {
		return false
	}
	_, _, err := r.admin.Ready(ctx)
	return err == nil
}

// stopSignals end the agent with a drain. SIGHUP (the terminal or ssh
// session closing) is one of them, so it never kills the agent outright —
// unless it was already ignored when the agent started (nohup).
func stopSignals() []os.Signal {
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// signalSet is the agent's signals, caught from the start of `run`.
type signalSet struct {
	stop, usr2 chan os.Signal
}

// listenForSignals installs the agent's signal handling before anything
// else: a signal that arrives meanwhile waits in its channel for runAgent.
func listenForSignals() *signalSet {
	// A journald restart breaks stderr; without this the next log line
	// would kill the agent (and so Envoy) with SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	s := &signalSet{stop: make(chan os.Signal, 2), usr2: make(chan os.Signal, 1)}
	signal.Notify(s.stop, stopSignals()...)
	signal.Notify(s.usr2, syscall.SIGUSR2)
	return s
}

// runAgent runs the agent.
func runAgent(cfg *config.Config, log *zap.Logger, level zap.AtomicLevel, sigs *signalSet) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hurry := make(chan struct{})
	defer signal.Stop(sigs.stop)
	go func() {
		sig := <-sigs.stop
		log.Info("stop signal received; stopping", zap.String("signal", sig.String()))
		cancel()
		sig = <-sigs.stop
		log.Info("second stop signal received; skipping the drain", zap.String("signal", sig.String()))
		close(hurry)
	}()

	tracker := state.NewTracker()
	var running atomic.Pointer[runningEnvoy]
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		_ = sdnotify.Run(context.Background(), tracker, sdnotify.Options{
			Healthy:   func(ctx context.Context) bool { return running.Load().healthy(ctx) },
			StopGrace: agent.AfterDrain, Log: log,
		})
	}()
	log.Info("starting", zap.String("version", version.Version), zap.String("mesh", cfg.Mesh),
		zap.String("role", string(cfg.Role)), zap.String("name", cfg.Name), zap.String("address", cfg.Address),
		zap.String("clock", clockState(timesync.Check())))
	m := metrics.New(tracker)
	var ag *agent.Agent
	ag = agent.New(agent.Options{
		Config: cfg, Log: log, Tracker: tracker, Hurry: hurry, Metrics: m,
		OnReadiness: func(rs *localserver.Server) {
			rs.HandleMetrics(m)
			rs.Handle("/logging", loggingHandler(level, &running, log))
			rs.HandleMaintenance(localserver.Maintenance{Drain: ag.Drain, Undrain: ag.Undrain})
		},
		OnEnvoy: func(a *envoy.Admin, p *envoy.Process) { running.Store(&runningEnvoy{a, p}) },
	})
	drainOnSIGUSR2(ctx, sigs.usr2, ag, log)
	err := ag.Run(ctx)
	<-notified // the last STATUS= line reaches systemd before exit
	if err != nil {
		if exitcode.IsConfig(err) {
			log.Error("cannot run: " + err.Error())
		} else {
			log.Error("failed: " + err.Error())
		}
		return reportedError{err}
	}
	log.Info("stopped")
	return nil
}

// drainOnSIGUSR2 makes SIGUSR2 a maintenance drain, as in kuma-dp; only
// `zoneproxy undrain` ends it.
func drainOnSIGUSR2(ctx context.Context, usr2 chan os.Signal, ag *agent.Agent, log *zap.Logger) {
	go func() {
		defer signal.Stop(usr2)
		for {
			select {
			case <-ctx.Done():
				return
			case <-usr2:
			}
			if err := ag.Drain(); err != nil {
				log.Warn("SIGUSR2: cannot drain: "+err.Error(), zap.String("signal", "user defined signal 2"))
				continue
			}
			log.Info("SIGUSR2: draining for maintenance; `zoneproxy undrain` ends it", zap.String("signal", "user defined signal 2"))
		}
	}()
}

// clockState is the system clock's NTP state for the start-up line: what
// decides whether an expired token or certificate is final.
func clockState(s timesync.Status) string {
	switch {
	case s.Synced:
		return "synchronised"
	case s.Err != nil:
		return "unknown (" + s.Err.Error() + ")"
	}
	return "not synchronised"
}
