// Package backoff holds the jittered exponential backoff and the clock that
// the bootstrap loop and the xDS relay's reconnects share, and a sleep
// that ends with its context.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Clock is the time source of a retry loop; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// Backoff doubles from Initial to Max. While it grows, each delay is drawn
// from (¼d, d], so proxies that started together (a fleet rebooting, a
// new mesh rolled out) drift apart instead of polling the control plane in
// waves; at Max it is drawn from (¾Max, Max], which keeps the request rate
// low and the wait for a new mesh under Max.
type Backoff struct {
	Initial, Max time.Duration
	// Rand returns a number in [0, 1); nil uses math/rand.
	Rand func() float64
}

// Delay is the wait after the n-th failed attempt (n ≥ 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		if d > b.Max/2 { // doubling would pass Max, or overflow near MaxInt64
			d = b.Max
			break
		}
		d *= 2
	}
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	if d >= b.Max {
		return b.Max - time.Duration(r()*float64(b.Max)/4)
	}
	return d - time.Duration(r()*float64(d)*3/4)
}

// Sleep waits d, and reports false if ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
