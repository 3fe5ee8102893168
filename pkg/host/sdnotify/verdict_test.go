package sdnotify

import (
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// STATUS= gives the verdict /ready and the metrics give: a hung Envoy in
// READY is not "Envoy ready". Answers that change nothing the unit says
// (a live Envoy answering again, Envoy's answers while draining) send
// nothing.
func TestStatusFollowsEnvoysAnswers(t *testing.T) {
	s := listen(t)
	tr := state.NewTracker()
	start(t, tr, Options{StopGrace: time.Second})
	s.next() // STATUS=starting

	tr.Set(state.EnvoyStarting, "Envoy starting")
	if got := s.next(); got != "STATUS=Envoy starting" {
		t.Fatalf("got %q", got)
	}
	// Envoy's answers while starting say nothing new.
	tr.SetEnvoy(state.EnvoyHealth{Probed: true, Err: "connection refused", At: time.Now()})
	tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "INITIALIZING", At: time.Now()})
	tr.Set(state.Ready, "Envoy ready")
	if got := s.next(); got != "READY=1\nSTATUS=Envoy ready" {
		t.Fatalf("entering READY: got %q", got)
	}
	tr.SetEnvoy(state.EnvoyHealth{Probed: true, Word: "LIVE", Live: true, At: time.Now()})
	s.mark("mark: live")
	if got := s.next(); got != "mark: live" {
		t.Fatalf("a live Envoy answering sent %q", got)
	}

	steps := []struct {
		name string
		h    state.EnvoyHealth
		want string
	}{
		{"Envoy stopped (kill -STOP)", state.EnvoyHealth{Probed: true, Err: "no answer within 1s (is Envoy stopped or hung?)"},
			"STATUS=Envoy's admin API does not answer /ready: no answer within 1s (is Envoy stopped or hung?)"},
		{"Envoy reports another state", state.EnvoyHealth{Probed: true, Word: "DRAINING"}, "STATUS=Envoy reports DRAINING, not LIVE"},
		{"Envoy live again", state.EnvoyHealth{Probed: true, Word: "LIVE", Live: true}, "STATUS=Envoy ready"},
	}
	for _, st := range steps {
		st.h.At = time.Now()
		tr.SetEnvoy(st.h)
		if got := s.next(); got != st.want {
			t.Fatalf("%s: got %q, want %q", st.name, got, st.want)
		}
	}

	tr.Set(state.Drained, "drained for maintenance")
	if got := s.next(); got != "STATUS=drained for maintenance" {
		t.Fatalf("got %q", got)
	}
	tr.SetEnvoy(state.EnvoyHealth{Probed: true, Err: "no answer within 1s", At: time.Now()})
	s.mark("mark: drained")
	if got := s.next(); got != "mark: drained" {
		t.Fatalf("Envoy's answer while DRAINED sent %q", got)
	}
}
