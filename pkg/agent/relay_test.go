package agent

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// The agent runs on whatever xDS feature Options.StartXDS gives: what the
// stream's events say reaches readiness and /status.
func TestAgentOnAFakeXDSFeature(t *testing.T) {
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	served := xds.StreamState{Upstream: xds.Upstream{State: xds.Unreachable, Since: at},
		Cached: xds.CacheState{InUse: true, WrittenAt: at, Since: at}}
	tests := []struct {
		name     string
		fake     *fakeXDS
		phase    state.Phase // when the hook runs
		hook     func(h xds.Hooks)
		want     state.Phase
		detail   string
		cpState  xds.UpstreamState
		cpSays   string
		cacheUse bool
	}{
		{name: "a refusal while Envoy starts: the agent waits for the control plane", fake: &fakeXDS{stream: xds.StreamState{Upstream: xds.Upstream{State: xds.Refused}, Refusal: "token expired"}},
			phase: state.EnvoyStarting, hook: func(h xds.Hooks) { h.Waiting("refused: token expired") },
			want: state.WaitingForControlPlane, detail: "refused: token expired", cpState: xds.Refused, cpSays: "refused this proxy's stream: token expired"},
		{name: "a refusal while serving leaves READY alone", fake: &fakeXDS{stream: xds.StreamState{Upstream: xds.Upstream{State: xds.Refused}}},
			phase: state.Ready, hook: func(h xds.Hooks) { h.Waiting("refused") }, want: state.Ready, detail: "Envoy ready", cpState: xds.Refused},
		{name: "the cache serves: READY says so, /status shows it", fake: &fakeXDS{stream: served},
			phase: state.Ready, hook: func(h xds.Hooks) { h.ServingChanged() },
			want: state.Ready, detail: "serving the cached configuration of 2026-11-20T08:00:00Z", cpState: xds.Unreachable, cpSays: "does not answer", cacheUse: true},
		{name: "direct mode: nothing is relayed", fake: &fakeXDS{direct: true},
			phase: state.Ready, hook: func(xds.Hooks) {}, want: state.Ready, detail: "Envoy ready", cpSays: "no stream yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got xds.Options
			cfg := &config.Config{XDSRelay: true, CPAddress: "https://cp.example:5678"}
			a := New(Options{Config: cfg, Tracker: state.NewTracker(), StartXDS: func(o xds.Options) (XDSFeature, error) {
				got = o
				return tt.fake, nil
			}})
			a.caPEM = []byte("the CA read at start")
			wd, err := openWorkDir(filepath.Join(t.TempDir(), "work"))
			if err != nil {
				t.Fatal(err)
			}
			defer wd.cleanup()
			f, err := a.startXDS(wd, []byte("{}"), nil, nil, &launchPrep{})
			if err != nil || f != tt.fake {
				t.Fatalf("started %v, %v; want the fake", f, err)
			}
			if !bytes.Equal(got.ControlPlane.CAPEM, a.caPEM) || got.ControlPlane.URL != cfg.CPAddress || !got.Relay {
				t.Errorf("the feature is not given the agent's control plane and CA: %+v", got.ControlPlane)
			}
			if (a.xds.get() != nil) == tt.fake.direct {
				t.Errorf("relayed feature kept: %v", a.xds.get() != nil)
			}
			a.tracker.Set(tt.phase, "Envoy ready")
			tt.hook(got.Hooks)
			snap := a.tracker.Current()
			if snap.Phase != tt.want || !strings.Contains(snap.Detail, tt.detail) {
				t.Errorf("%s %q, want %s %q", snap.Phase, snap.Detail, tt.want, tt.detail)
			}
			st := a.Status()
			if st.ControlPlane.State != tt.cpState || !strings.Contains(st.ControlPlane.Says, tt.cpSays) || (st.Cache != nil) != tt.cacheUse {
				t.Errorf("/status: %+v, cache %+v", st.ControlPlane, st.Cache)
			}
		})
	}
}

// In direct mode, and before Envoy starts, no relay tells the agent
// anything: READY is plain, no refusal is quoted, and a new Envoy asks
// the control plane itself.
func TestNoRelayedFeature(t *testing.T) {
	var none xdsSlot
	if got := none.servingDetail(); got != "Envoy ready" {
		t.Errorf("READY says %q", got)
	}
	if got := none.lastRefusal(); got != "" {
		t.Errorf("refusal %q", got)
	}
	if !none.newEnvoyConfigured() {
		t.Error("a new Envoy in direct mode is said to get no configuration")
	}
	relayed := xdsSlot{f: &fakeXDS{stream: xds.StreamState{Upstream: xds.Upstream{State: xds.Refused}, Refusal: "token expired"}}}
	if relayed.lastRefusal() != "token expired" || relayed.newEnvoyConfigured() {
		t.Errorf("relayed: refusal %q, new Envoy configured %v", relayed.lastRefusal(), relayed.newEnvoyConfigured())
	}
}
