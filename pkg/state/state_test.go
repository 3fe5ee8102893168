package state

import (
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// newTestTracker's clock moves one second on every reading, so a Since
// that was not re-read keeps an older value than the latest reading.
func newTestTracker() *Tracker {
	now := epoch
	t := NewTracker()
	t.now = func() time.Time { now = now.Add(time.Second); return now }
	t.current.Since = t.now()
	return t
}

func at(s int) time.Time { return epoch.Add(time.Duration(s) * time.Second) }

// step moves the tracker: a drain when deadline is set, else a plain Set.
type step struct {
	phase    Phase
	detail   string
	deadline time.Time
}

func (s step) apply(t *Tracker) {
	if !s.deadline.IsZero() {
		t.SetDraining(s.detail, s.deadline)
		return
	}
	t.Set(s.phase, s.detail)
}

func TestTrackerSnapshots(t *testing.T) {
	deadline := at(100)
	cases := []struct {
		name  string
		steps []step
		want  Snapshot
	}{
		{"starts in STARTING", nil, Snapshot{Phase: Starting, Detail: "starting", Since: at(1)}},
		{"a new phase is entered now", []step{{phase: WaitingForMesh, detail: "attempt 1"}},
			Snapshot{Phase: WaitingForMesh, Detail: "attempt 1", Since: at(2)}},
		{"a new detail in the same phase keeps Since", []step{
			{phase: WaitingForMesh, detail: "attempt 1"},
			{phase: WaitingForMesh, detail: "attempt 2"},
			{phase: WaitingForMesh, detail: "attempt 3"},
		}, Snapshot{Phase: WaitingForMesh, Detail: "attempt 3", Since: at(2)}},
		{"leaving and re-entering a phase restarts Since", []step{
			{phase: WaitingForMesh, detail: "attempt 1"},
			{phase: WaitingForControlPlane, detail: "refused"},
			{phase: WaitingForMesh, detail: "attempt 2"},
		}, Snapshot{Phase: WaitingForMesh, Detail: "attempt 2", Since: at(4)}},
		{"draining enters TERMINATING with its deadline", []step{
			{phase: Ready, detail: "Envoy ready"},
			{detail: "draining (30s left)", deadline: deadline},
		}, Snapshot{Phase: Terminating, Detail: "draining (30s left)", Since: at(3), DrainDeadline: deadline}},
		{"drain updates keep Since and the deadline", []step{
			{phase: Ready, detail: "Envoy ready"},
			{detail: "draining (30s left)", deadline: deadline},
			{detail: "draining (29s left)", deadline: deadline},
		}, Snapshot{Phase: Terminating, Detail: "draining (29s left)", Since: at(3), DrainDeadline: deadline}},
		{"stopping after the drain clears the deadline", []step{
			{phase: Ready, detail: "Envoy ready"},
			{detail: "draining (30s left)", deadline: deadline},
			{phase: Terminating, detail: "stopping Envoy"},
		}, Snapshot{Phase: Terminating, Detail: "stopping Envoy", Since: at(3)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker()
			for _, s := range tc.steps {
				s.apply(tr)
			}
			if got := tr.Current(); got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// An observer that reads late gets only the newest snapshot, and the
// agent never blocks on an observer that does not read at all.
func TestSubscribeYieldsTheLatestSnapshot(t *testing.T) {
	cases := []struct {
		name      string
		steps     []step
		wantPhase Phase
		wantDet   string
	}{
		{"nothing happened yet", nil, Starting, "starting"},
		{"one change", []step{{phase: WaitingForMesh, detail: "attempt 1"}}, WaitingForMesh, "attempt 1"},
		{"many changes unread", []step{
			{phase: WaitingForMesh, detail: "attempt 1"},
			{phase: WaitingForMesh, detail: "attempt 2"},
			{phase: Bootstrapped, detail: "bootstrapped"},
			{phase: Ready, detail: "Envoy ready"},
		}, Ready, "Envoy ready"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker()
			subs := []<-chan Snapshot{tr.Subscribe(), tr.Subscribe()}
			applied := make(chan struct{})
			go func() {
				for _, s := range tc.steps {
					s.apply(tr)
				}
				close(applied)
			}()
			select {
			case <-applied:
			case <-time.After(20 * time.Second):
				t.Fatal("Set blocked on observers that have not read")
			}
			for i, c := range subs {
				select {
				case got := <-c:
					if got.Phase != tc.wantPhase || got.Detail != tc.wantDet || got != tr.Current() {
						t.Errorf("observer %d read %+v, want the latest %+v", i, got, tr.Current())
					}
				default:
					t.Fatalf("observer %d has no snapshot to read", i)
				}
				select {
				case stale := <-c:
					t.Errorf("observer %d read a second, stale snapshot %+v", i, stale)
				default:
				}
			}
		})
	}
}

// A subscriber that keeps up sees every change, in order.
func TestSubscriberThatKeepsUpSeesEveryChange(t *testing.T) {
	tr := newTestTracker()
	c := tr.Subscribe()
	for _, p := range []Phase{Starting, WaitingForControlPlane, WaitingForMesh, Bootstrapped, EnvoyStarting, Ready, Terminating, Stopped} {
		if p != Starting {
			tr.Set(p, "")
		}
		select {
		case got := <-c:
			if got.Phase != p {
				t.Fatalf("read %s, want %s", got.Phase, p)
			}
		default:
			t.Fatalf("no snapshot to read after entering %s", p)
		}
	}
}

// Restate changes only the detail of the phase it names, and only while
// that phase is current: a phase another observer set meanwhile stands.
func TestRestateNeverChangesThePhase(t *testing.T) {
	for _, tc := range []struct {
		name       string
		current    Phase
		wantPhase  Phase
		wantDetail string
	}{
		{"ready: the detail is restated", Ready, Ready, "serving the cached configuration"},
		{"a zone listener went missing meanwhile", NoZoneListener, NoZoneListener, "no listener"},
		{"draining meanwhile", Terminating, Terminating, "no listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker()
			tr.Set(tc.current, "no listener")
			sub := tr.Subscribe()
			<-sub
			since := tr.Current().Since
			tr.Restate(Ready, "serving the cached configuration")
			got := tr.Current()
			if got.Phase != tc.wantPhase || got.Detail != tc.wantDetail || !got.Since.Equal(since) {
				t.Fatalf("after Restate: %s %q since %v; want %s %q since %v", got.Phase, got.Detail, got.Since, tc.wantPhase, tc.wantDetail, since)
			}
			select {
			case s := <-sub:
				if tc.current != Ready {
					t.Errorf("observers told of %s %q, though nothing changed", s.Phase, s.Detail)
				}
			default:
				if tc.current == Ready {
					t.Error("observers were not told of the new detail")
				}
			}
		})
	}
}
