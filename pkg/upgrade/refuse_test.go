package upgrade

import (
	"errors"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// When a reload may happen, and whether it hands Envoy over or starts
// over: never during a drain or a stop, nor while Envoy starts; a refusal
// that a wait may lift, one that only a restart lifts (exit 69), and the
// rest (exit 75) are told apart.
func TestReloadableSaysWhatIsRefusedAndWhy(t *testing.T) {
	serving := Conditions{Phase: state.Ready, Started: true, EnvoyStarted: true, Serving: true, Adoptable: true}
	with := func(change func(c *Conditions)) Conditions {
		c := serving
		change(&c)
		return c
	}
	const wait, restart, later = "wait", "restart", "later"
	for _, tc := range []struct {
		name      string
		c         Conditions
		withEnvoy bool
		refusal   string // "" when the reload is done
		kind      string
	}{
		{name: "serving", c: serving, withEnvoy: true},
		{name: "no zone listener yet", c: with(func(c *Conditions) { c.Phase = state.NoZoneListener }), withEnvoy: true},
		{name: "waiting for the mesh", c: Conditions{Phase: state.WaitingForMesh, Started: true}},
		{name: "waiting for the control plane", c: Conditions{Phase: state.WaitingForControlPlane, Started: true}},
		{name: "before the listeners", c: Conditions{Phase: state.Starting}, refusal: "still starting", kind: wait},
		{name: "Envoy starting", c: with(func(c *Conditions) { c.Phase, c.Serving = state.EnvoyStarting, false }), refusal: "Envoy is starting (ENVOY_STARTING)", kind: wait},
		{name: "Envoy exited", c: with(func(c *Conditions) { c.EnvoyExited = true }), refusal: "Envoy is starting", kind: wait},
		{name: "draining", c: with(func(c *Conditions) { c.Phase = state.Draining }), refusal: "undrain", kind: later},
		{name: "drained", c: with(func(c *Conditions) { c.Phase = state.Drained }), refusal: "undrain", kind: later},
		{name: "a drain asked", c: with(func(c *Conditions) { c.DrainAsked = true }), refusal: "undrain", kind: later},
		{name: "stopping", c: with(func(c *Conditions) { c.Phase = state.Terminating }), refusal: "stopping", kind: later},
		{name: "failed", c: with(func(c *Conditions) { c.Phase = state.Failed }), refusal: "stopping", kind: later},
		{name: "a stop signal just came", c: with(func(c *Conditions) { c.StopAsked = true }), refusal: "stopping", kind: later},
		{name: "a handover's old Envoy drains", c: with(func(c *Conditions) { c.RetiringPID = 4242 }), refusal: "old Envoy (pid 4242) still drains", kind: later},
		{name: "an Envoy that cannot be handed over", c: with(func(c *Conditions) { c.Adoptable = false }), refusal: "cannot be handed over; restart instead", kind: restart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withEnvoy, err := Reloadable(tc.c)
			if tc.refusal == "" {
				if err != nil || withEnvoy != tc.withEnvoy {
					t.Fatalf("got %v, %v; want done, with Envoy %v", withEnvoy, err, tc.withEnvoy)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrReloadRefused) || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.refusal)
			}
			kind := later
			if errors.As(err, new(StartUnderWay)) {
				kind = wait
			}
			var impossible interface{ CannotReload() bool }
			if errors.As(err, &impossible) && impossible.CannotReload() {
				kind = restart
			}
			if kind != tc.kind {
				t.Fatalf("%v: a refusal of kind %s, want %s", err, kind, tc.kind)
			}
		})
	}
}
