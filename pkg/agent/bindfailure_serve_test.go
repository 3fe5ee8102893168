package agent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// bindAdmin is an Envoy admin API whose Envoy has the egress listener
// only from the second Envoy on.
type bindAdmin struct {
	fakeAdmin
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
	holder, port := holdPort(t)
	a, _, tracker := egressAgent(t, port)
	admin := &bindAdmin{fakeAdmin: fakeAdmin{counts: func(int) (int, error) { return 0, nil }}}
	first := newFakeProc()
	started := make(chan *fakeProc, 4)
	e := &supervised{admin: admin, proc: first, start: func() (EnvoyProcess, error) {
		p := newFakeProc()
		admin.bound.Store(true) // the port is free: the new Envoy binds it
		started <- p
		return p, nil
	}}
	a.envoyRejected(envoyBindNACK(egressListener, fmt.Sprintf("127.0.0.1:%d", port), "Address already in use"))
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
	time.Sleep(2 * listenerCheckEvery) // the port is still held: nothing restarts
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
