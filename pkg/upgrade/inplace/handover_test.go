package inplace

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

const runningBootstrap = `{"admin":{"address":{"pipe":{"path":"/run/zp/kuma-envoy-admin.sock"}}}}`

// handoverRig is an agent serving one Envoy of generation 1 in slot A,
// with a handover's kit.
type handoverRig struct {
	*host
	envoy   *fakeEnvoy
	relay   *fakeRelay
	old     *supervisetest.Proc
	serve   *supervise.Serving
	mu      sync.Mutex
	written map[string]string
}

func newHandoverRig(t *testing.T, direct bool) *handoverRig {
	cfg := &config.Config{Role: config.RoleEgress, Address: "127.0.0.1", EgressPort: 10002}
	fe := &fakeEnvoy{build: "new-build", listeners: listenwatch.Names(listenwatch.Expected(cfg))}
	r := &handoverRig{host: newHost(cfg, fe), envoy: fe, relay: &fakeRelay{state: xds.Connected}, old: newFakeProc(), written: map[string]string{}}
	oldAdmin := newFakeAdmin(fe.listeners...)
	r.serve = &supervise.Serving{Admin: oldAdmin, Proc: r.old}
	r.sup.Started(supervise.Current{Admin: oldAdmin, Proc: r.old, Build: "old-build", Generation: 1})
	kit := &Kit{Stats: new(atomic.Pointer[envoy.Admin]), Socket: "/run/zp/kuma-xds.sock", Launch: &upgrade.Launch{
		Write: func(name string, doc []byte) (string, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.written[name] = string(doc)
			return "/run/zp/" + name, nil
		},
		Bootstrap: []byte(runningBootstrap),
		A:         upgrade.Files{Bootstrap: "bootstrap.yaml", Admin: envoy.AdminAddress{Socket: "/run/zp/kuma-envoy-admin.sock"}},
	}}
	if !direct {
		kit.Relay = r.relay
		r.feature = r.relay
	}
	r.Started(upgrade.Place{Generation: 1, Slot: upgrade.SlotA}, kit)
	r.serve.Start = r.RestartFrom(kit, upgrade.Place{Generation: 1, Slot: upgrade.SlotA}, "old-build")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { // the serve loop
		for {
			select {
			case req := <-r.Requests():
				r.Handover(ctx, r.serve, req)
			case <-ctx.Done():
				return
			}
		}
	}()
	return r
}

func (r *handoverRig) file(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written[name]
}

// What a handover asked for becomes: refused (the old Envoy serves on,
// nothing started), failed (a new Envoy started and ended, the old one
// serves on, a new bootstrap undone), or done (the new Envoy serves in
// slot B, the old one drains and exits, a new bootstrap kept).
func TestAHandoverIsRefusedFailedOrDone(t *testing.T) {
	defer func(d time.Duration) { handoverLiveTimeout = d }(handoverLiveTimeout)
	handoverLiveTimeout = 5 * time.Second
	const newBootstrap = `{"admin":{"address":{"pipe":{"path":"/run/zp/kuma-envoy-admin.sock"}}},"node":{"id":"next"}}`
	for _, tc := range []struct {
		name        string
		notServing  bool
		drained     bool
		direct      bool
		cpState     xds.UpstreamState
		newExits    bool
		bootstrap   string // a new one asked for
		wantErr     string // "" when done
		wantStarted int
		wantSlotA   string // the bootstrap slot A's file holds after, "" unwritten
	}{
		{name: "no live Envoy yet", notServing: true, wantErr: "no live Envoy is supervised yet"},
		{name: "drained for maintenance", drained: true, wantErr: "`zoneproxy undrain` starts a new Envoy anyway"},
		{name: "direct mode", direct: true, wantErr: "it needs the xDS relay"},
		{name: "the control plane away", cpState: xds.Unreachable, wantErr: "not connected"},
		{name: "the new Envoy exits", newExits: true, wantErr: "the old Envoy (pid 4242) keeps serving: the new Envoy exited", wantStarted: 1},
		{name: "the new Envoy exits, with a new bootstrap", newExits: true, bootstrap: newBootstrap, wantErr: "keeps serving", wantStarted: 1, wantSlotA: runningBootstrap},
		{name: "done", wantStarted: 1},
		{name: "done, with a new bootstrap", bootstrap: newBootstrap, wantStarted: 1, wantSlotA: newBootstrap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHandoverRig(t, tc.direct)
			r.serving.Store(!tc.notServing)
			r.drained.Store(tc.drained)
			if tc.cpState != "" {
				r.relay.state = tc.cpState
			}
			r.envoy.exits = tc.newExits
			var doc []byte
			if tc.bootstrap != "" {
				doc = []byte(tc.bootstrap)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := r.replaceEnvoy(ctx, "test", doc)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("failed: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
			if len(r.envoy.started) != tc.wantStarted {
				t.Fatalf("started %d new Envoys, want %d", len(r.envoy.started), tc.wantStarted)
			}
			if got := r.file("bootstrap.yaml"); got != tc.wantSlotA {
				t.Errorf("slot A's bootstrap %q, want %q", got, tc.wantSlotA)
			}
			counts := r.results.Snapshot()
			if tc.wantErr != "" {
				if r.serve.Proc != r.old || r.Serving().Generation != 1 || r.old.Exited() {
					t.Fatalf("the old Envoy does not serve on: %+v, generation %d", r.serve, r.Serving().Generation)
				}
				if failed := counts["failed"]; (failed == 1) != (tc.wantStarted == 1) || errors.Is(err, upgrade.ErrHandoverRefused) == (tc.wantStarted == 1) {
					t.Errorf("a refusal counted as failed, or a failure as a refusal: %v, counts %v", err, counts)
				}
				return
			}
			next := r.envoy.started[0]
			if r.serve.Proc != next || r.Serving() != (upgrade.Place{Generation: 2, Slot: upgrade.SlotB}) || r.sup.Now().Build != "new-build" {
				t.Fatalf("the new Envoy does not serve: place %+v, build %q", r.Serving(), r.sup.Now().Build)
			}
			if counts["success"] != 1 || len(r.served) != 1 || r.restated != 1 || r.GenerationWords("Envoy ready") != "Envoy ready (Envoy generation 2)" {
				t.Errorf("the agent was not told: counts %v, served %d, restated %d", counts, len(r.served), r.restated)
			}
			select {
			case <-r.old.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the old Envoy was not retired")
			}
			// An undrain restarts the new Envoy on slot B's files.
			p, err := r.serve.Start()
			if err != nil || r.sup.Now().Proc != p || r.sup.Now().Generation != 2 || !strings.Contains(strings.Join(r.envoy.specs[1].Args, " "), upgrade.SlotBBootstrapFile) {
				t.Fatalf("the restart: %v, %+v, args %v", err, r.sup.Now(), r.envoy.specs[1].Args)
			}
			r.EndRetirements()
		})
	}
}
