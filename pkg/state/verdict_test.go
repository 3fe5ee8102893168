package state

import "testing"

// The verdict is the phase, corrected by Envoy's last answer while the
// phase is READY; an answer asked for before the phase began is stale.
func TestVerdict(t *testing.T) {
	since := at(10)
	live := EnvoyHealth{Probed: true, Word: "LIVE", Live: true, At: at(11)}
	down := EnvoyHealth{Probed: true, Err: "no answer within 1s (is Envoy stopped or hung?)", At: at(11)}
	draining := EnvoyHealth{Probed: true, Word: "DRAINING", At: at(11)}
	staleDown := down
	staleDown.At = at(9)
	cases := []struct {
		name  string
		phase Phase
		det   string
		envoy EnvoyHealth
		want  Verdict
	}{
		{"ready and Envoy live", Ready, "Envoy ready", live, Verdict{"READY", true, "Envoy ready"}},
		{"ready on the cache keeps its detail", Ready, "serving the cached configuration", live, Verdict{"READY", true, "serving the cached configuration"}},
		{"ready but Envoy's admin does not answer", Ready, "Envoy ready", down,
			Verdict{"ENVOY_UNREACHABLE", false, "Envoy's admin API does not answer /ready: no answer within 1s (is Envoy stopped or hung?)"}},
		{"ready but Envoy reports another state", Ready, "Envoy ready", draining, Verdict{"ENVOY_DRAINING", false, "Envoy reports DRAINING, not LIVE"}},
		{"ready but Envoy answered not LIVE without a word", Ready, "Envoy ready", EnvoyHealth{Probed: true, At: at(11)}, Verdict{"ENVOY_NOT_LIVE", false, "Envoy reports NOT_LIVE, not LIVE"}},
		// The agent enters READY on a LIVE of its own, newer than the answer.
		{"an answer from before READY began is stale", Ready, "Envoy ready", staleDown, Verdict{"READY", true, "Envoy ready"}},
		{"probed, no answer yet", Ready, "Envoy ready", EnvoyHealth{Probed: true}, Verdict{"READY", true, "Envoy ready"}},
		{"no prober: the phase stands", Ready, "Envoy ready", EnvoyHealth{}, Verdict{"READY", true, "Envoy ready"}},
		{"another phase is never corrected", Drained, "drained for maintenance", down, Verdict{"DRAINED", false, "drained for maintenance"}},
		{"waiting says why", WaitingForMesh, `waiting for mesh "payments"`, EnvoyHealth{}, Verdict{"WAITING_FOR_MESH", false, `waiting for mesh "payments"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Phase: tc.phase, Detail: tc.det, Since: since, Envoy: tc.envoy}
			if got := s.Verdict(); got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Envoy's answers reach observers only when they change in kind; a new
// phase keeps the last answer.
func TestSetEnvoyTellsObserversOfChangesOnly(t *testing.T) {
	tr := newTestTracker()
	tr.Set(Ready, "Envoy ready")
	sub := tr.Subscribe()
	<-sub
	told := func() (Snapshot, bool) {
		select {
		case s := <-sub:
			return s, true
		default:
			return Snapshot{}, false
		}
	}
	steps := []struct {
		name string
		h    EnvoyHealth
		told bool
	}{
		{"first answer", EnvoyHealth{Probed: true, Word: "LIVE", Live: true, At: at(5)}, true},
		{"the same answer later", EnvoyHealth{Probed: true, Word: "LIVE", Live: true, At: at(6)}, false},
		{"no answer", EnvoyHealth{Probed: true, Err: "no answer within 1s", At: at(7)}, true},
		{"still none", EnvoyHealth{Probed: true, Err: "no answer within 1s", At: at(8)}, false},
		{"live again", EnvoyHealth{Probed: true, Word: "LIVE", Live: true, At: at(9)}, true},
	}
	for _, st := range steps {
		tr.SetEnvoy(st.h)
		s, ok := told()
		if ok != st.told {
			t.Fatalf("%s: observers told %v, want %v", st.name, ok, st.told)
		}
		if ok && s.Envoy != st.h {
			t.Fatalf("%s: observers read %+v, want %+v", st.name, s.Envoy, st.h)
		}
		if got := tr.Current().Envoy; got != st.h {
			t.Fatalf("%s: Current has %+v, want the latest %+v", st.name, got, st.h)
		}
	}
	tr.Set(Drained, "drained")
	if got := tr.Current().Envoy; got != steps[len(steps)-1].h {
		t.Fatalf("a new phase lost Envoy's last answer: %+v", got)
	}
}
