package relay

import (
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
)

// While kuma-cp refuses a restarted proxy's stream, the relay asks again
// every 100-300 ms, faster once kuma-cp's default deregistration delay is
// about to end (its delete-to-upsert gap is what the sidecars may see),
// and at the ordinary backoff once the refusals look like another proxy
// with this name.
func TestRefusedStreamsAreRetriedFasterWhenKumaCPIsAboutToLetGo(t *testing.T) {
	b := backoff.Backoff{Initial: 2 * time.Second, Max: 30 * time.Second}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		after    time.Duration
		min, max time.Duration
	}{
		{"first refusal", 0, heldRetryMin, heldRetryMax},
		{"mid-delay", 5 * time.Second, heldRetryMin, heldRetryMax},
		{"release due", 9 * time.Second, heldSoonMin, heldSoonMax},
		{"default delay over", 11 * time.Second, heldSoonMin, heldSoonMax},
		{"past patience: ordinary backoff", heldPatience + time.Second, b.Initial / 4, b.Max},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := heldRetries{}
			h.next(b, t0) // the run of refusals starts at t0
			for range 50 {
				if d := h.next(b, t0.Add(tc.after)); d < tc.min || d > tc.max {
					t.Fatalf("next retry in %v, want %v to %v", d, tc.min, tc.max)
				}
				if tc.after >= heldPatience {
					break
				}
			}
		})
	}
}
