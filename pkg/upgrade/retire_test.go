package upgrade

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The old Envoy of a handover stops accepting, drains and is ended; while
// it drains, its pid says so (a reload or a handover waits for it).
func TestTheOldEnvoyDrainsAndIsEnded(t *testing.T) {
	var r Retirements
	admin, proc := &fakeAdmin{}, newFakeProc(41)
	release, awaiting := make(chan struct{}), make(chan struct{})
	r.Retire(Old{Admin: admin, Proc: proc, Deadline: time.Now().Add(time.Minute), Grace: time.Second, Log: zap.NewNop(),
		Await: func(ctx context.Context, cut <-chan struct{}) string { close(awaiting); <-release; return "idle" }})
	<-awaiting
	if r.Draining() != 41 {
		t.Fatalf("draining %d while the old Envoy drains", r.Draining())
	}
	close(release)
	r.End()
	drained, stopped, closed := admin.state()
	if !drained || !stopped || !closed || !proc.stopped.Load() || r.Draining() != 0 {
		t.Fatalf("drained %v, listeners stopped %v, admin closed %v, ended %v, still draining %d", drained, stopped, closed, proc.stopped.Load(), r.Draining())
	}
}

// An old Envoy that will not drain (connections stay, it ignores SIGTERM)
// is cut short by a stop of the agent, or a second stop signal, and
// killed; the failures on the way are logged, not fatal.
func TestAnOldEnvoyThatWillNotDrainIsCutShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(r *Retirements, skip chan struct{})
	}{
		{"the agent stops", func(r *Retirements, _ chan struct{}) { r.End() }},
		{"a second stop signal", func(r *Retirements, skip chan struct{}) { close(skip); r.End() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Retirements
			core, logs := observer.New(zap.InfoLevel)
			admin, proc := &fakeAdmin{drainErr: errAdminDown}, newFakeProc(41)
			proc.ignoresTERM = true
			skip := make(chan struct{})
			r.Retire(Old{Admin: admin, Proc: proc, Deadline: time.Now().Add(time.Hour), Grace: time.Second, Log: zap.New(core), Skip: skip,
				Await: func(ctx context.Context, cut <-chan struct{}) string { <-cut; return "cancelled" }})
			ended := make(chan struct{})
			go func() { tc.cut(&r, skip); close(ended) }()
			select {
			case <-ended:
			case <-time.After(30 * time.Second):
				t.Fatal("the old Envoy's drain was not cut short")
			}
			for _, says := range []string{"cannot start the old Envoy's drain", "cannot close the old Envoy's listeners", "ignored SIGTERM; killed it", "exited after its drain"} {
				if logs.FilterMessageSnippet(says).Len() != 1 {
					t.Errorf("no log saying %q", says)
				}
			}
		})
	}
}
