package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

type scriptedListeners struct {
	answers [][]string // one per call; nil = an error
	call    int
}

func (s *scriptedListeners) Listeners(context.Context) ([]string, error) {
	a := s.answers[min(s.call, len(s.answers)-1)]
	s.call++
	if a == nil {
		return nil, errors.New("admin unreachable")
	}
	return a, nil
}

func TestZoneListenersKeepReadyHonest(t *testing.T) {
	const (
		zi = "self_zoneingress_dp_zi-port"
		ze = "self_zoneegress_dp_ze-port"
	)
	tests := []struct {
		name       string
		role       config.Role
		answers    [][]string
		wantPhases []state.Phase // after each check
		wantDetail string        // in the last NO_ZONE_LISTENER detail
		wantWarns  int
	}{
		{name: "egress with its listener", role: config.RoleEgress, answers: [][]string{{ze}},
			wantPhases: []state.Phase{state.Ready}},
		{name: "egress without: the fix is named", role: config.RoleEgress, answers: [][]string{{}, {}, {}},
			wantPhases: []state.Phase{state.NoZoneListener, state.NoZoneListener, state.NoZoneListener},
			wantDetail: "MeshIdentity selects this proxy and the mesh has a MeshExternalService", wantWarns: 1},
		{name: "ingress listener arrives later", role: config.RoleIngress, answers: [][]string{{"system_dynamicconfig"}, {zi}},
			wantPhases: []state.Phase{state.NoZoneListener, state.Ready}, wantDetail: "only when this zone has a MeshService", wantWarns: 1},
		{name: "combined missing one", role: config.RoleCombined, answers: [][]string{{zi}},
			wantPhases: []state.Phase{state.NoZoneListener}, wantDetail: "Envoy has no listener " + ze, wantWarns: 1},
		{name: "listener removed later", role: config.RoleEgress, answers: [][]string{{ze}, {}},
			wantPhases: []state.Phase{state.Ready, state.NoZoneListener}, wantWarns: 1},
		{name: "an unanswered check changes nothing", role: config.RoleEgress, answers: [][]string{{}, nil, {ze}},
			wantPhases: []state.Phase{state.NoZoneListener, state.NoZoneListener, state.Ready}, wantWarns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Mesh: "payments", Role: tt.role, Name: "zp", Address: "127.0.0.1", IngressPort: 10001, EgressPort: 10002}
			core, logs := observer.New(zap.DebugLevel)
			tracker := state.NewTracker()
			m := metrics.New(tracker)
			a := New(Options{Config: cfg, Log: zap.New(core), Tracker: tracker, Metrics: m})
			w := &listenerWatch{a: a, admin: &scriptedListeners{answers: tt.answers}, want: expectedListeners(cfg)}
			var detail string
			for i, want := range tt.wantPhases {
				w.check(context.Background())
				snap := tracker.Current()
				if snap.Phase != want {
					t.Fatalf("check %d: phase %s, want %s (%s)", i, snap.Phase, want, snap.Detail)
				}
				if snap.Phase == state.NoZoneListener {
					detail = snap.Detail
				}
			}
			if !strings.Contains(detail, tt.wantDetail) {
				t.Errorf("detail %q, want it to contain %q", detail, tt.wantDetail)
			}
			if n := logs.FilterLevelExact(zap.WarnLevel).Len(); n != tt.wantWarns {
				t.Errorf("%d warnings, want %d (once per change)", n, tt.wantWarns)
			}
		})
	}
}
