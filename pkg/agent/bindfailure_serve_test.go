package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// bindAdmin is an Envoy admin API whose Envoy has the egress listener
// only from the second Envoy on.
type bindAdmin struct {
	supervisetest.Admin
	bound atomic.Bool
}

func (b *bindAdmin) Listeners(context.Context) ([]envoy.Listener, error) {
	if !b.bound.Load() {
		return nil, nil
	}
	return []envoy.Listener{{Name: egressListener, Address: "127.0.0.1:1"}}, nil
}

// Serving, the agent explains a zone listener Envoy could not bind, and
// restarts Envoy once its port is free; the new Envoy binds it: READY.
func TestServeRestartsEnvoyOnceARejectedPortIsFree(t *testing.T) {
	holder, port := testutil.HoldPort(t)
	a, _, tracker := egressAgent(t, port)
	admin := &bindAdmin{Admin: supervisetest.Admin{Counts: func(int) (int, error) { return 0, nil }}}
	first := supervisetest.NewProc()
	started := make(chan *supervisetest.Proc, 4)
	e := &supervised{Admin: admin, Proc: first, Start: func() (EnvoyProcess, error) {
		p := supervisetest.NewProc()
		admin.bound.Store(true) // the port is free: the new Envoy binds it
		started <- p
		return p, nil
	}}
	rejectBind(a, fmt.Sprintf("127.0.0.1:%d", port))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.serve(ctx, e) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	snap := awaitPhase(t, tracker, state.NoZoneListener)
	if !strings.Contains(snap.Detail, "could not bind listener "+egressListener) {
		t.Fatalf("NO_ZONE_LISTENER says %q", snap.Detail)
	}
	time.Sleep(2 * listenwatch.CheckEvery) // the port is still held: nothing restarts
	if len(started) != 0 || first.Exited() {
		t.Fatal("Envoy restarted while the port was held")
	}
	holder.Close()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("Envoy was not restarted once the port was free")
	}
	awaitPhase(t, tracker, state.Ready)
	if !first.Exited() {
		t.Fatal("the Envoy that rejected the listener still runs")
	}
}

const egressListener = "self_zoneegress_dp_ze-port"

// rejectBind is Envoy's LDS NACK of the egress listener for its bind to
// addr, as the relay passes it on.
func rejectBind(a *Agent, addr string) {
	a.listeners.Rejected(listenwatch.ListenerTypeURL,
		fmt.Sprintf("Error adding/updating listener(s) %s: cannot bind '%s': Address already in use\n", egressListener, addr), false)
}

func egressAgent(t *testing.T, port uint32) (*Agent, *observer.ObservedLogs, *state.Tracker) {
	t.Helper()
	cfg := &config.Config{Mesh: "payments", Role: config.RoleEgress, Name: "zp", Address: "127.0.0.1", EgressPort: int(port)}
	core, logs := observer.New(zap.DebugLevel)
	tracker := state.NewTracker()
	return New(Options{Config: cfg, Log: zap.New(core), Tracker: tracker}), logs, tracker
}

// The restart for a freed port replaces Envoy, says what it is for, and
// forgets what the old Envoy rejected.
func TestRestartForBindReplacesEnvoy(t *testing.T) {
	holder, port := testutil.HoldPort(t)
	a, logs, tracker := egressAgent(t, port)
	rejectBind(a, fmt.Sprintf("127.0.0.1:%d", port))
	holder.Close()
	w := a.listeners.Serving(&bindAdmin{}, 0)
	w.Check(context.Background())
	select {
	case <-w.RebindDue():
	default:
		t.Fatalf("no restart asked for once the port was free (%s)", tracker.Current().Detail)
	}

	old := supervisetest.NewProc()
	var started []*supervisetest.Proc
	e := &supervised{Admin: &maintAdmin{Admin: supervisetest.Admin{Counts: func(int) (int, error) { return 0, nil }}}, Proc: old,
		Start: func() (EnvoyProcess, error) {
			p := supervisetest.NewProc()
			started = append(started, p)
			return p, nil
		}}
	if err := a.restartForBind(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if !old.Exited() || len(started) != 1 || e.Proc != started[0] || started[0].Exited() {
		t.Fatalf("old Envoy exited %v, %d started; want the old one stopped and the new one supervised", old.Exited(), len(started))
	}
	if logs.FilterMessageSnippet("restarting Envoy so that it binds listener "+egressListener+" on port "+strconv.Itoa(int(port))).Len() != 1 {
		t.Error("the restart does not say what it is for")
	}
	// The new Envoy has no listener yet: that is the control plane's to send.
	w = a.listeners.Serving(&bindAdmin{}, 0)
	w.Check(context.Background())
	if d := tracker.Current().Detail; strings.Contains(d, "could not bind") {
		t.Fatalf("the old Envoy's failure outlived it: %s", d)
	}
}

// A freed port waits for a restart while a new Envoy would get no
// configuration: the control plane does not answer and no cache is
// served. Envoy's other listeners keep serving meanwhile.
func TestFreedPortWaitsForConfigurationToRestartEnvoy(t *testing.T) {
	tests := []struct {
		name     string
		upstream xds.UpstreamState
		cached   bool
		restart  bool
	}{
		{name: "control plane connected", upstream: xds.Connected, restart: true},
		{name: "unreachable, cache served", upstream: xds.Unreachable, cached: true, restart: true},
		{name: "kuma-cp holds the stream, cache served", upstream: xds.Held, cached: true, restart: true},
		{name: "unreachable, no cache", upstream: xds.Unreachable},
		{name: "refused, no cache", upstream: xds.Refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, port := testutil.HoldPort(t)
			ln.Close() // free
			a, logs, _ := egressAgent(t, port)
			a.xds.set(&fakeXDS{stream: xds.StreamState{Upstream: xds.Upstream{State: tt.upstream}, Cached: xds.CacheState{InUse: tt.cached}}})
			w := a.listeners.Serving(&bindAdmin{}, 0)
			rejectBind(a, fmt.Sprintf("127.0.0.1:%d", port))
			w.Check(context.Background())
			w.Check(context.Background())
			asked := false
			select {
			case <-w.RebindDue():
				asked = true
			default:
			}
			if asked != tt.restart {
				t.Fatalf("restart asked %v, want %v", asked, tt.restart)
			}
			if n := logs.FilterMessageSnippet("a new Envoy would get no configuration").Len(); (n == 1) == tt.restart || n > 1 {
				t.Errorf("%d lines about the wait", n)
			}
		})
	}
}
