package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
)

// A new Envoy that exits, never turns LIVE, or turns LIVE without the zone
// listeners (it could not bind them beside the old one) fails the
// handover, saying which; the old Envoy then serves on (handover).
func TestAwaitNextSaysWhyTheNewEnvoyCannotTakeOver(t *testing.T) {
	defer func(d time.Duration) { handoverLiveTimeout = d }(handoverLiveTimeout)
	handoverLiveTimeout = 300 * time.Millisecond
	cfg := &config.Config{Role: config.RoleEgress, Address: "127.0.0.1", EgressPort: 10002}
	for _, tc := range []struct {
		name  string
		setUp func(admin *fakeEnvoyAdmin, proc *fakeProc)
		says  string
	}{
		{"it serves", func(a *fakeEnvoyAdmin, _ *fakeProc) { a.setLive(true) }, ""},
		{"it exits", func(_ *fakeEnvoyAdmin, p *fakeProc) { p.exit() }, "the new Envoy exited (exit status 0)"},
		{"it never turns LIVE", func(*fakeEnvoyAdmin, *fakeProc) {}, "was not ready within 300ms: it reports PRE_INITIALIZING"},
		{"its admin API never answers", func(a *fakeEnvoyAdmin, _ *fakeProc) { a.unreachable = true }, "was not ready within 300ms: its admin API does not answer"},
		{"LIVE without the zone listener", func(a *fakeEnvoyAdmin, _ *fakeProc) { a.setLive(true); a.want = nil },
			"it is LIVE without the zone listeners [self_zoneegress_dp_ze-port] (could it not bind them beside the old Envoy?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(Options{Config: cfg})
			admin := &fakeEnvoyAdmin{want: listenwatch.Expected(cfg)}
			proc := newFakeProc()
			tc.setUp(admin, proc)
			err := a.awaitNext(context.Background(), admin, proc)
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("a new Envoy that serves: %v", err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}
