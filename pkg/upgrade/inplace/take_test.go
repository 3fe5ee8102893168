package inplace

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/observability/accesslog"
	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// What the previous program handed over decides the new one's start:
// with its Envoy, READY at once, and Envoy's xDS relayed as it was.
func TestTakeWhatThePreviousProgramHandedOver(t *testing.T) {
	for _, tc := range []struct {
		name           string
		handed         upgrade.Handover // nil: a fresh start
		relayFlag      bool
		wantPhase      state.Phase
		wantGeneration int
		wantRelayed    bool
		wantResume     bool
	}{
		{name: "a fresh start", relayFlag: true, wantPhase: state.Starting, wantGeneration: 1, wantRelayed: true},
		{name: "a fresh start in direct mode", wantPhase: state.Starting, wantGeneration: 1},
		{name: "a reload before Envoy ran", handed: stateHandover{upgrade.State{Version: upgrade.Version, Generation: 2}}, relayFlag: true,
			wantPhase: state.Starting, wantGeneration: 3, wantRelayed: true},
		{name: "a reload with a relayed Envoy, the relay now off", relayFlag: false,
			handed:    stateHandover{upgrade.State{Version: upgrade.Version, Generation: 2, Envoy: &upgrade.EnvoyState{PID: 77, Relayed: true, Resume: &xds.Resumption{}}}},
			wantPhase: state.Ready, wantGeneration: 3, wantRelayed: true, wantResume: true},
		{name: "a reload with a direct Envoy, the relay now on", relayFlag: true,
			handed:    stateHandover{upgrade.State{Version: upgrade.Version, Generation: 1, Envoy: &upgrade.EnvoyState{PID: 77}}},
			wantPhase: state.Ready, wantGeneration: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newHost(&config.Config{XDSRelay: tc.relayFlag}, nil)
			u.h.Handover = tc.handed
			u.tracker.Set(state.Starting, "starting")
			if err := u.Take(); err != nil {
				t.Fatal(err)
			}
			if got := u.tracker.Current().Phase; got != tc.wantPhase {
				t.Errorf("phase %s, want %s", got, tc.wantPhase)
			}
			if gen := u.Record().Generation(); gen != tc.wantGeneration {
				t.Errorf("generation %d, want %d", gen, tc.wantGeneration)
			}
			if u.Relayed() != tc.wantRelayed || (u.Resumption() != nil) != tc.wantResume {
				t.Errorf("relayed %v, resumed %v", u.Relayed(), u.Resumption() != nil)
			}
			if (u.Taken() != nil) != (tc.handed != nil) || u.Taken().AdoptsEnvoy() != (tc.wantPhase == state.Ready) {
				t.Errorf("taken %+v", u.Taken())
			}
		})
	}
}

// On a fresh start the agent's sockets are made anew, and kept for the
// next reload.
func TestSocketsAreMadeAndKept(t *testing.T) {
	u := newHost(&config.Config{}, nil)
	dir := t.TempDir()
	ln, err := u.Listen(preflight.Port{Flag: "--readiness-port", Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	relay, err := u.RelayListen(filepath.Join(dir, "relay.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	al, err := u.AccessLog(accesslog.Options{Path: filepath.Join(dir, "access.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	mm, err := u.MeshMetric(meshmetric.Options{Path: filepath.Join(dir, "meshmetric.sock"),
		Stats: func(context.Context, string) (string, error) { return "", nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	u.KeepWorkDir(upgrade.Dir{Path: dir}, true)
	h := u.holdings(false)
	if h.Listeners["--readiness-port"] != ln || u.held.relayLn != relay || h.WorkDir.Path != dir || !h.TemporaryWorkDir {
		t.Fatalf("not kept: %+v", h)
	}
	if _, err := net.Dial("unix", filepath.Join(dir, "relay.sock")); err != nil {
		t.Errorf("the relay's socket: %v", err)
	}
}

// A handed-over dir is taken only where the configuration still puts it.
func TestMoved(t *testing.T) {
	for _, tc := range []struct {
		want, path string
		moved      bool
	}{
		{"/run/zp", "/run/zp", false},
		{"/run/zp/", "/run/zp", false},
		{"/run/zp/../zp", "/run/zp", false},
		{"/run/other", "/run/zp", true},
	} {
		if got := Moved(tc.want, tc.path); got != tc.moved {
			t.Errorf("Moved(%q, %q) = %v, want %v", tc.want, tc.path, got, tc.moved)
		}
	}
	if exe, args := startedAs(); !filepath.IsAbs(exe) || len(args) == 0 || !strings.HasSuffix(args[0], filepath.Base(exe)) {
		t.Errorf("started as %q, %v", exe, args)
	}
}
