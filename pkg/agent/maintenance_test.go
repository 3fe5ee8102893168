package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// maintAdmin is an Envoy admin API that records the drain's calls and
// always has the egress listener.
type maintAdmin struct {
	supervisetest.Admin
	mu2      sync.Mutex
	drained  int
	stopped  int
	listened int
}

func (m *maintAdmin) DrainListeners(context.Context) error {
	m.mu2.Lock()
	defer m.mu2.Unlock()
	m.drained++
	return nil
}

func (m *maintAdmin) StopListeners(context.Context) error {
	m.mu2.Lock()
	defer m.mu2.Unlock()
	m.stopped++
	return nil
}

func (m *maintAdmin) Listeners(context.Context) ([]envoy.Listener, error) {
	m.mu2.Lock()
	defer m.mu2.Unlock()
	m.listened++
	return []envoy.Listener{{Name: "self_zoneegress_dp_ze-port", Address: "127.0.0.1:10002"}}, nil
}

func (m *maintAdmin) counts() (drained, stopped, listened int) {
	m.mu2.Lock()
	defer m.mu2.Unlock()
	return m.drained, m.stopped, m.listened
}

func awaitPhase(t *testing.T, tr *state.Tracker, want state.Phase) state.Snapshot {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if snap := tr.Current(); snap.Phase == want {
			return snap
		}
		time.Sleep(10 * time.Millisecond)
	}
	snap := tr.Current()
	t.Fatalf("phase %s (%s), want %s", snap.Phase, snap.Detail, want)
	return snap
}

func maintConfig() *config.Config {
	return &config.Config{Mesh: "payments", Role: config.RoleEgress, Name: "zp", Address: "127.0.0.1",
		EgressPort: 10002, DrainTime: time.Minute}
}

func TestDrainIsRefusedBeforeEnvoyServes(t *testing.T) {
	a, _ := testAgent(t, maintConfig())
	a.tracker.Set(state.WaitingForMesh, `waiting for mesh "payments"`)
	err := a.Drain()
	if !errors.Is(err, ErrNotServing) || !strings.Contains(err.Error(), "WAITING_FOR_MESH") {
		t.Fatalf("Drain() = %v, want ErrNotServing naming the phase", err)
	}
	if a.maint.want.Load() {
		t.Fatal("a refused drain was remembered")
	}
}

// drain → DRAINING → DRAINED (listeners closed, the listener check off),
// undrain → a new Envoy → READY, stop → the stop's drain, Envoy stopped.
func TestMaintenanceDrainUndrainAndStop(t *testing.T) {
	a, logs := testAgent(t, maintConfig())
	admin := &maintAdmin{Admin: supervisetest.Admin{Counts: func(int) (int, error) { return 0, nil }}}
	first := supervisetest.NewProc()
	restarts := make(chan *supervisetest.Proc, 4)
	e := &supervised{Admin: admin, Proc: first, Start: func() (EnvoyProcess, error) {
		p := supervisetest.NewProc()
		restarts <- p
		return p, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- a.serve(ctx, e) }()

	awaitPhase(t, a.tracker, state.Ready)
	if err := a.Drain(); err != nil {
		t.Fatal(err)
	}
	snap := awaitPhase(t, a.tracker, state.Drained)
	if !strings.Contains(snap.Detail, "zoneproxy undrain") || !strings.Contains(snap.Detail, "since ") {
		t.Errorf("DRAINED detail %q does not say since when and how to undo", snap.Detail)
	}
	drained, stopped, listened := admin.counts()
	failed := admin.FailedAt()
	if failed.IsZero() || drained != 1 || stopped != 1 {
		t.Fatalf("health checks failed: %v, graceful drains %d, listener stops %d; want a failed health check, 1, 1", !failed.IsZero(), drained, stopped)
	}
	if first.Exited() {
		t.Fatal("the drain stopped Envoy")
	}
	// The listener check is off: READY never comes back while drained.
	time.Sleep(2 * listenwatch.CheckEvery)
	if _, _, now := admin.counts(); now != listened || a.tracker.Current().Phase != state.Drained {
		t.Fatalf("the listener check ran while drained (%d → %d checks, phase %s)", listened, now, a.tracker.Current().Phase)
	}
	if logs.FilterMessageSnippet("drained: out of rotation").Len() != 1 {
		t.Error("no info line for DRAINED")
	}

	a.Undrain()
	awaitPhase(t, a.tracker, state.Ready)
	if !first.Exited() || len(restarts) != 1 {
		t.Fatalf("undrain: old Envoy exited %v, restarts %d; want the old one stopped and one new", first.Exited(), len(restarts))
	}
	second := <-restarts
	if second.Exited() {
		t.Fatal("the new Envoy was stopped")
	}
	if !a.failingSince.IsZero() {
		t.Error("the undrained Envoy is taken for failing its health checks")
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return after the stop")
	}
	if !second.Exited() {
		t.Fatal("the stop left Envoy running")
	}
}

// Envoy exiting by itself while drained is still a crash.
func TestEnvoyExitWhileDrainedFails(t *testing.T) {
	a, _ := testAgent(t, maintConfig())
	admin := &maintAdmin{Admin: supervisetest.Admin{Counts: func(int) (int, error) { return 0, nil }}}
	proc := supervisetest.NewProc()
	e := &supervised{Admin: admin, Proc: proc, Start: func() (EnvoyProcess, error) { t.Fatal("restarted"); return nil, nil }}
	served := make(chan error, 1)
	go func() { served <- a.serve(context.Background(), e) }()
	awaitPhase(t, a.tracker, state.Ready)
	_ = a.Drain()
	awaitPhase(t, a.tracker, state.Drained)
	proc.Exit()
	select {
	case err := <-served:
		if !errors.Is(err, ErrEnvoyExited) {
			t.Fatalf("serve = %v, want ErrEnvoyExited", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Envoy's exit while drained went unnoticed")
	}
}

// An undrain during the drain wait restarts Envoy without waiting it out.
func TestUndrainCutsTheDrainShort(t *testing.T) {
	cfg := maintConfig()
	cfg.DrainTime = time.Hour
	a, _ := testAgent(t, cfg)
	admin := &maintAdmin{Admin: supervisetest.Admin{Counts: func(int) (int, error) { return 1, nil }}}
	proc := supervisetest.NewProc()
	started := make(chan struct{}, 1)
	e := &supervised{Admin: admin, Proc: proc, Start: func() (EnvoyProcess, error) { started <- struct{}{}; return supervisetest.NewProc(), nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.serve(ctx, e) }()
	awaitPhase(t, a.tracker, state.Ready)
	_ = a.Drain()
	awaitPhase(t, a.tracker, state.Draining)
	a.Undrain()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the undrain waited for the drain")
	}
	awaitPhase(t, a.tracker, state.Ready)
}

// A stop after a maintenance drain does not wait --drain-min again: the
// load balancer has long seen the failing health check.
func TestStopWhileDrainedSkipsDrainMin(t *testing.T) {
	cfg := maintConfig()
	cfg.DrainMin, cfg.DrainTime = time.Minute, 2*time.Minute
	a, _ := testAgent(t, cfg)
	a.failingSince = time.Now().Add(-time.Hour)
	admin := &supervisetest.Admin{Counts: func(int) (int, error) { return 0, nil }}
	start := time.Now()
	if got := a.drain(admin, supervisetest.NewProc(), cfg.DrainMin); got != supervise.DrainIdle {
		t.Fatalf("drain ended with %q, want idle", got)
	}
	if took := time.Since(start); took >= cfg.DrainMin/2 {
		t.Fatalf("the stop's drain took %s: it waited --drain-min again", took)
	}
}
