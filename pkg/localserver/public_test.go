package localserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// cpText is a control plane's error message with a line of its own, a
// carriage return and a terminal's clear-screen sequence.
const cpText = "kuma-cp: mesh refused\nWATCHDOG=trigger\r\x1b[2J"

// /ready on the health listener says the word and a fixed reason only;
// loopback's keeps the reason, escaped.
func TestReadyNeverShowsAControlPlaneRaw(t *testing.T) {
	cases := []struct {
		name         string
		set          func(*state.Tracker)
		public, loop string
	}{
		{"waiting for the control plane", func(tr *state.Tracker) { tr.Set(state.WaitingForControlPlane, cpText) },
			"WAITING_FOR_CONTROL_PLANE\nwaiting for the control plane",
			"WAITING_FOR_CONTROL_PLANE\n" + `kuma-cp: mesh refused\nWATCHDOG=trigger\r\x1b[2J` + "\nagent generation 2 (pid 4242)"},
		{"ready on the cache", func(tr *state.Tracker) { tr.Set(state.Ready, cpText) },
			"READY",
			"READY\n" + `kuma-cp: mesh refused\nWATCHDOG=trigger\r\x1b[2J` + "\nagent generation 2 (pid 4242)"},
		{"Envoy not live", func(tr *state.Tracker) {
			tr.Set(state.Ready, "Envoy ready")
			tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "INITIALIZING", At: time.Now().Add(time.Hour)})
		}, "ENVOY_INITIALIZING\nEnvoy is not LIVE", "ENVOY_INITIALIZING\nEnvoy reports INITIALIZING, not LIVE\nagent generation 2 (pid 4242)"},
		{"Envoy says something odd", func(tr *state.Tracker) {
			tr.Set(state.Ready, "Envoy ready")
			tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "x\n\x1b[2J", At: time.Now().Add(time.Hour)})
		}, "ENVOY_NOT_LIVE\nEnvoy is not LIVE", `ENVOY_x\n\x1b[2J` + "\n" + `Envoy reports x\n\x1b[2J, not LIVE` + "\nagent generation 2 (pid 4242)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := state.NewTracker()
			s := New(loopbackListener(t), tr)
			s.SetGenerations(func() string { return "agent generation 2 (pid 4242)" })
			tc.set(tr)
			if _, got := s.PublicStatus(); got != tc.public {
				t.Errorf("health listener: %q, want %q", got, tc.public)
			}
			_, got := s.Status(context.Background())
			if got != tc.loop {
				t.Errorf("loopback: %q, want %q", got, tc.loop)
			}
			if strings.ContainsAny(got, "\r\x1b") {
				t.Errorf("loopback: raw control characters in %q", got)
			}
		})
	}
}
