package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

// MaxRetryAfter caps a server's Retry-After, so that a proxy asking for
// hours does not keep the zone proxy down that long once it recovers.
const MaxRetryAfter = 5 * time.Minute

// Wait describes one pause between attempts, for logs and status lines.
type Wait struct {
	Attempt int           // attempts made so far
	Next    time.Duration // pause before the next attempt
	Waited  time.Duration // since the first attempt
	Err     *Error        // why the last attempt failed
}

// Loop retries Attempt until it succeeds, fails permanently, ctx ends or
// Timeout (if > 0) passes.
type Loop struct {
	Attempt func(ctx context.Context) ([]byte, error)
	Backoff backoff.Backoff
	Clock   backoff.Clock
	Timeout time.Duration
	OnWait  func(Wait)
}

// Run returns the bootstrap, ctx.Err() when cancelled, the permanent
// *Error, or a timeout error wrapping the last failure.
func (l Loop) Run(ctx context.Context) ([]byte, error) {
	clock := l.Clock
	if clock == nil {
		clock = backoff.RealClock
	}
	start := clock.Now()
	for n := 1; ; n++ {
		out, err := l.Attempt(ctx)
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		be, ok := err.(*Error)
		if !ok {
			be = &Error{Kind: Retryable, Msg: "bootstrap attempt failed", Err: err}
		}
		if be.Kind == Permanent {
			return nil, be
		}
		waited := clock.Now().Sub(start)
		delay := l.Backoff.Delay(n)
		if be.RetryAfter > 0 {
			delay = max(delay, min(be.RetryAfter, MaxRetryAfter))
		}
		if l.Timeout > 0 {
			left := l.Timeout - waited
			if left <= 0 {
				return nil, &TimeoutError{After: l.Timeout, Attempts: n, Last: be}
			}
			delay = min(delay, left)
		}
		if l.OnWait != nil {
			l.OnWait(Wait{Attempt: n, Next: delay, Waited: waited, Err: be})
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-clock.After(delay):
		}
	}
}

// TimeoutError is returned when --bootstrap-timeout passes.
type TimeoutError struct {
	After    time.Duration
	Attempts int
	Last     *Error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("no bootstrap after %s and %d attempts (%s); last error: %v", e.After, e.Attempts, config.KeyBootstrapTimeout.Flag(), e.Last)
}

func (e *TimeoutError) Unwrap() error { return e.Last }

// ExitError is what `run` returns once Run failed: a permanent refusal is a
// configuration error (exit 78: systemd does not restart the unit); a
// --bootstrap-timeout expiry stays a runtime error (exit 1).
func ExitError(err error) error {
	var te *TimeoutError
	if KindOf(err) == Permanent && !errors.As(err, &te) {
		return exitcode.AsConfig(err)
	}
	return err
}
