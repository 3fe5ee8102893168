package agent

import (
	"context"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// The watchdog's rule for healthy: the agent alone is enough until Envoy
// runs; then Envoy must run and its admin API answer.
func TestWatchdogHealthyRule(t *testing.T) {
	tests := []struct {
		name        string
		envoy       bool // Envoy has been started
		exited      bool
		adminDown   bool
		wantHealthy bool
	}{
		{name: "no Envoy yet", wantHealthy: true},
		{name: "Envoy runs and answers", envoy: true, wantHealthy: true},
		{name: "Envoy exited", envoy: true, exited: true},
		{name: "Envoy's admin API does not answer", envoy: true, adminDown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := testAgent(t, &config.Config{})
			if tt.envoy {
				proc := supervisetest.NewProc()
				if tt.exited {
					proc.Exit()
				}
				a.sup.Started(supervise.Current{Admin: &fakeEnvoyAdmin{unreachable: tt.adminDown}, Proc: proc})
			}
			if got := a.envoyHealthy(context.Background()); got != tt.wantHealthy {
				t.Fatalf("healthy %v, want %v", got, tt.wantHealthy)
			}
		})
	}
}

// A relay withdrawn outside a drain or a stop can never serve again: the
// watchdog stops vouching for it. Waiting and draining are not that.
func TestWatchdogRefusesAWithdrawalOutsideADrain(t *testing.T) {
	tests := []struct {
		phase     state.Phase
		withdrawn bool
		wantStuck bool
	}{
		{phase: state.Ready, withdrawn: true, wantStuck: true},
		{phase: state.EnvoyStarting, withdrawn: true, wantStuck: true},
		{phase: state.WaitingForControlPlane, withdrawn: true, wantStuck: true},
		{phase: state.WaitingForControlPlane},
		{phase: state.WaitingForMesh},
		{phase: state.Ready},
		{phase: state.Draining, withdrawn: true},
		{phase: state.Drained, withdrawn: true},
		{phase: state.Terminating, withdrawn: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			if got := withdrawnOutsideADrain(tt.withdrawn, tt.phase); got != tt.wantStuck {
				t.Fatalf("withdrawn %v in %s: stuck %v, want %v", tt.withdrawn, tt.phase, got, tt.wantStuck)
			}
		})
	}
}
