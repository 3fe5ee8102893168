package throttle

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestOneMessagePerIntervalWithTheCountLeftOut(t *testing.T) {
	th := Throttle{Every: time.Minute}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at             time.Duration
		ok             bool
		suppressedSeen int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{59 * time.Second, false, 0},
		{time.Minute, true, 2},
		{time.Minute + time.Second, false, 0},
		{3 * time.Minute, true, 1},
	}
	for i, s := range steps {
		ok, n := th.Allow(t0.Add(s.at))
		if ok != s.ok || n != s.suppressedSeen {
			t.Fatalf("step %d (%s): got %v/%d, want %v/%d", i, s.at, ok, n, s.ok, s.suppressedSeen)
		}
	}
}

func TestWarnAddsTheSuppressedCount(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	l := zap.New(core)
	th := Throttle{Every: time.Hour}
	for range 5 {
		th.Warn(l, "backend down")
	}
	if logs.Len() != 1 {
		t.Fatalf("%d warnings, want 1", logs.Len())
	}
	th.next = time.Time{} // the hour has passed
	th.Warn(l, "backend down")
	last := logs.All()[1]
	if last.ContextMap()["suppressed"] != int64(4) {
		t.Fatalf("fields %v, want suppressed=4", last.ContextMap())
	}
}
