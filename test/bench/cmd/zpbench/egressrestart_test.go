package main

import (
	"testing"
	"time"
)

// A span runs from the first failure (or tick with no egress) to the next
// connection served; one still open at the end runs to the end.
func TestOutagesOf(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := func(ms int) connOutcome { return connOutcome{at: at(ms), kind: outcomeOK} }
	refused := func(ms int) connOutcome {
		return connOutcome{at: at(ms), kind: outcomeRefused, err: "connection refused"}
	}
	for _, tt := range []struct {
		name  string
		conns []connOutcome
		none  []time.Time
		want  time.Duration
		spans int
	}{
		{name: "all served", conns: []connOutcome{ok(0), ok(10), ok(20)}},
		{name: "refused, then served", conns: []connOutcome{ok(0), refused(10), refused(20), ok(110)}, want: 100 * time.Millisecond, spans: 1},
		{name: "none handed out, then served", conns: []connOutcome{ok(0), ok(300)}, none: []time.Time{at(100), at(200)}, want: 200 * time.Millisecond, spans: 1},
		{name: "two spans", conns: []connOutcome{refused(0), ok(50), ok(60), ok(500)}, none: []time.Time{at(400)}, want: 150 * time.Millisecond, spans: 2},
		{name: "down at the end", conns: []connOutcome{ok(0), refused(900)}, want: 100 * time.Millisecond, spans: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := outagesOf(tt.conns, tt.none, at(1000))
			r := egressRestartRun{outages: got}
			if len(got) != tt.spans || r.down() != tt.want {
				t.Fatalf("%d spans, %s down; want %d, %s (%+v)", len(got), r.down(), tt.spans, tt.want, got)
			}
		})
	}
}

// The figure passes only if every restart was within the target, said it
// was a restart, and did not withdraw (one stream accepted).
func TestEgressRestartRowVerdict(t *testing.T) {
	span1 := func(d time.Duration) []span { t0 := time.Now(); return []span{{from: t0, to: t0.Add(d)}} }
	good := egressRestartRun{outages: span1(300 * time.Millisecond), logged: true, accepted: 1}
	for _, tt := range []struct {
		name string
		run  egressRestartRun
		want string
	}{
		{"within the target", good, "PASS"},
		{"too long", egressRestartRun{outages: span1(1500 * time.Millisecond), logged: true, accepted: 1}, "FAIL"},
		{"withdrew", egressRestartRun{outages: span1(300 * time.Millisecond), logged: true, accepted: 2}, "FAIL"},
		{"did not say so", egressRestartRun{outages: span1(300 * time.Millisecond), accepted: 1}, "FAIL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &measured{errs: map[string]error{}, egressRestart: &egressRestartResult{restarts: []egressRestartRun{good, tt.run}}}
			if got := m.egressRestartRow().Result; got != tt.want {
				t.Fatalf("%s, want %s", got, tt.want)
			}
		})
	}
}
