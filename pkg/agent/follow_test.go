package agent

import (
	"testing"
	"time"
)

// A proxy checks the control plane's protocol at once when Envoy's is
// refused, and at a random moment of a few seconds when kuma-cp is back
// from an outage, so that a zone's proxies do not all ask in one instant.
func TestTheProtocolCheckAfterAnOutageIsSpread(t *testing.T) {
	last := func(n time.Duration) time.Duration { return n - 1 }
	tests := []struct {
		name     string
		unserved bool
		want     time.Duration
	}{
		{"Envoy's protocol refused: at once", true, 0},
		{"back from an outage: spread up to afterOutageSpread", false, afterOutageSpread - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := followDelay(tt.unserved, last); got != tt.want {
				t.Errorf("delay %v, want %v", got, tt.want)
			}
		})
	}
	for range 100 {
		if d := followDelay(false, randDuration); d < 0 || d >= afterOutageSpread {
			t.Fatalf("a drawn delay of %v is outside [0, %v)", d, afterOutageSpread)
		}
	}
}
