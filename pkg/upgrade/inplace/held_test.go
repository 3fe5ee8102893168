package inplace

import (
	"os"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// What a reload carries to the next program: the dirs and listeners
// always; with Envoy, its process, slot and launch, and its relay when
// Envoy's xDS is relayed.
func TestAReloadCarriesWhatTheAgentHolds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withEnvoy bool
		stateDir  bool
		feature   Feature
		relayed   bool
	}{
		{name: "before Envoy, no state dir"},
		{name: "before Envoy, with a state dir", stateDir: true},
		{name: "Envoy, direct", withEnvoy: true, feature: directFeature{}},
		{name: "Envoy, relayed", withEnvoy: true, stateDir: true, feature: &fakeRelay{resume: &xds.Resumption{}}, relayed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newHost(&config.Config{Concurrency: 2}, nil)
			u.feature = tc.feature
			u.KeepWorkDir(upgrade.Dir{Path: "/run/zp"}, false)
			if tc.stateDir {
				u.KeepStateDir(upgrade.Dir{Path: "/var/lib/zp"})
			}
			fifo := &os.File{}
			u.KeepObservability(func() *os.File { return fifo }, func() (*os.File, error) { return nil, nil })
			u.KeepCache(nil, envoy.Version{Version: "1.39.1", Build: "b"})
			u.keepListener("--readiness-port", nil)
			if tc.withEnvoy {
				p, err := envoy.Start(envoy.Spec{Path: "/bin/sleep", Args: []string{"60"}, Output: func(string) {}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Kill)
				u.sup.Started(supervise.Current{Proc: p})
				u.Started(upgrade.Place{Generation: 3, Slot: upgrade.SlotB}, nil)
				u.launched(launchOf(u.h.Config))
			}
			h := u.holdings(tc.withEnvoy)
			if h.WorkDir.Path != "/run/zp" || (h.StateDir != nil) != tc.stateDir || len(h.Listeners) != 1 || h.Generation != u.Record().Generation() {
				t.Fatalf("holdings %+v", h)
			}
			if (h.Envoy != nil) != tc.withEnvoy {
				t.Fatalf("Envoy handed over: %v, want %v", h.Envoy != nil, tc.withEnvoy)
			}
			if !tc.withEnvoy {
				return
			}
			e := h.Envoy
			if e.State.PID != u.sup.Now().Proc.PID() || e.State.Slot != upgrade.SlotB || e.State.HandoverGeneration != 3 ||
				e.State.Version.Build != "b" || e.State.Launch[string(config.KeyConcurrency)] != "2" || e.AccessLog != fifo || e.Flush != nil {
				t.Errorf("Envoy's state %+v", e)
			}
			if e.State.Relayed != tc.relayed || (e.State.Resume != nil) != tc.relayed {
				t.Errorf("relayed %v, resume %v; want relayed %v", e.State.Relayed, e.State.Resume, tc.relayed)
			}
		})
	}
}

// directFeature is Envoy's xDS in direct mode.
type directFeature struct{ Feature }

func (directFeature) Relayed() bool               { return false }
func (directFeature) Resumption() *xds.Resumption { return nil }
