// Package throttle keeps a repeating problem (a backend that is down, a
// broken listener polled every second) from flooding the log: one message
// per interval, with the count of those left out.
package throttle

import (
	"time"

	"go.uber.org/zap"
)

// Throttle lets one message through per Every. It belongs to one
// goroutine; the zero value with Every set is ready to use.
type Throttle struct {
	Every      time.Duration
	next       time.Time
	suppressed int
}

// Allow reports whether a message may go out at now and, if so, how many
// were held back since the last one.
func (t *Throttle) Allow(now time.Time) (ok bool, suppressed int) {
	if now.Before(t.next) {
		t.suppressed++
		return false, 0
	}
	suppressed, t.suppressed = t.suppressed, 0
	t.next = now.Add(t.Every)
	return true, suppressed
}

// Warn logs msg at warn level if allowed, with a "suppressed" count when
// messages were held back.
func (t *Throttle) Warn(l *zap.Logger, msg string, fields ...zap.Field) {
	ok, n := t.Allow(time.Now())
	if !ok {
		return
	}
	if n > 0 {
		fields = append(fields, zap.Int("suppressed", n))
	}
	l.Warn(msg, fields...)
}
