package backoff

import (
	"context"
	"math"
	"testing"
	"time"
)

// The draw ranges spread a fleet that starts together: (¼d, d] while the
// delay grows, (¾Max, Max] once it is capped.
func TestDelayRanges(t *testing.T) {
	b := func(r float64) Backoff {
		return Backoff{Initial: time.Second, Max: 8 * time.Second, Rand: func() float64 { return r }}
	}
	cases := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, time.Second},
		{1, 0.999999, 250*time.Millisecond + 750*time.Nanosecond},
		{2, 0, 2 * time.Second},
		{3, 0.5, 2500 * time.Millisecond},
		{4, 0, 8 * time.Second},
		{4, 0.999999, 6*time.Second + 2*time.Microsecond},
		{40, 0, 8 * time.Second},
	}
	for _, tc := range cases {
		if got := b(tc.r).Delay(tc.n); got != tc.want {
			t.Errorf("Delay(%d) with rand %v = %v, want %v", tc.n, tc.r, got, tc.want)
		}
	}
}

// A --retry-max near the largest duration must not overflow into zero or
// negative waits: a tight loop against the control plane.
func TestDelayNeverOverflows(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: math.MaxInt64, Rand: func() float64 { return 0.5 }}
	for n := 1; n <= 200; n++ {
		if d := b.Delay(n); d < 250*time.Millisecond {
			t.Fatalf("Delay(%d) = %v with Max %v", n, d, b.Max)
		}
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep slept on past its context's end")
	}
	if Sleep(ctx, 0) {
		t.Error("no wait on an ended context reported as done")
	}
	if !Sleep(context.Background(), 0) || !Sleep(context.Background(), time.Millisecond) {
		t.Error("a wait that ran its course reported as cut short")
	}
}
