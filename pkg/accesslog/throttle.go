package accesslog

import "time"

// throttle lets one message through per interval and counts the rest; it
// belongs to a single goroutine.
type throttle struct {
	every      time.Duration
	next       time.Time
	suppressed int
}

func (t *throttle) allow(now time.Time) (ok bool, suppressed int) {
	if now.Before(t.next) {
		t.suppressed++
		return false, 0
	}
	suppressed, t.suppressed = t.suppressed, 0
	t.next = now.Add(t.every)
	return true, suppressed
}
