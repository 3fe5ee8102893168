package supervise

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
)

func testSupervisor(t *testing.T) (*Supervisor, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	return &Supervisor{Log: zap.New(core)}, logs
}

func TestDrainEnds(t *testing.T) {
	never := func(int) (int, error) { return 1, nil }
	idle := func(int) (int, error) { return 0, nil }
	tests := []struct {
		name                string
		drainTime, drainMin time.Duration
		failingFor          time.Duration // health checks failing before the drain (maintenance)
		counts              func(call int) (int, error)
		failErr             error
		skip, exit          bool
		want                DrainEnd
		atLeast             time.Duration
	}{
		{name: "zero connections end it once quiet", drainTime: time.Minute, counts: idle, want: DrainIdle, atLeast: DrainQuiet},
		{name: "not before the minimum", drainTime: time.Minute, drainMin: 2500 * time.Millisecond, counts: idle, want: DrainIdle, atLeast: 2500 * time.Millisecond},
		{name: "failing health checks count toward the minimum", drainTime: time.Minute, drainMin: time.Hour, failingFor: 2 * time.Hour, counts: idle, want: DrainIdle, atLeast: DrainQuiet},
		{name: "the minimum is capped at the maximum", drainTime: 1500 * time.Millisecond, drainMin: time.Hour, counts: never, want: DrainTimeUp, atLeast: 1500 * time.Millisecond},
		{name: "connections keep it to the maximum", drainTime: 1500 * time.Millisecond, counts: never, want: DrainTimeUp, atLeast: 1500 * time.Millisecond},
		{name: "an unreadable count is not zero", drainTime: 1500 * time.Millisecond, counts: func(int) (int, error) { return 0, errors.New("gone") }, want: DrainTimeUp, atLeast: 1500 * time.Millisecond},
		{name: "skip ends it at once", drainTime: time.Minute, counts: never, skip: true, want: DrainSkipped},
		{name: "Envoy's exit ends it", drainTime: time.Minute, counts: never, exit: true, want: DrainEnvoyExited},
		{name: "no admin API ends it at once", drainTime: time.Minute, counts: never, failErr: errors.New("refused"), want: DrainNoAdmin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := testSupervisor(t)
			skip := make(chan struct{})
			if tt.skip {
				close(skip)
			}
			s.Skip = skip
			proc := supervisetest.NewProc()
			if tt.exit {
				proc.Exit()
			}
			var failingSince time.Time
			if tt.failingFor > 0 {
				failingSince = time.Now().Add(-tt.failingFor)
			}
			start := time.Now()
			w := NewWindow(failingSince, tt.drainMin, tt.drainTime)
			got := s.Drain(&supervisetest.Admin{Counts: tt.counts, FailErr: tt.failErr}, proc, w, func() {})
			if got != tt.want {
				t.Fatalf("drain ended with %q, want %q", got, tt.want)
			}
			if took := time.Since(start); took < tt.atLeast {
				t.Fatalf("drain ended after %s, before %s", took, tt.atLeast)
			}
		})
	}
}

func TestStoppingSaysWhetherAnExitBelongsToAStop(t *testing.T) {
	tests := []struct {
		name       string
		stopped    bool // the stop came first
		lateStop   bool // it comes just after the exit
		bySignal   bool // Envoy ended as if told to stop
		wantStop   bool
		atLeastFor time.Duration
	}{
		{name: "during a stop", stopped: true, wantStop: true},
		{name: "a clean exit the stop follows", bySignal: true, lateStop: true, wantStop: true},
		{name: "a clean exit no stop follows, while serving", bySignal: true, wantStop: false, atLeastFor: StopSignalGrace},
		{name: "a crash while serving", wantStop: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.stopped {
				cancel()
			}
			if tt.lateStop {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			proc := supervisetest.NewProc()
			proc.BySignal = tt.bySignal
			proc.Exit()
			start := time.Now()
			if got := Stopping(ctx, proc); got != tt.wantStop {
				t.Fatalf("Stopping = %v, want %v", got, tt.wantStop)
			}
			if took := time.Since(start); took < tt.atLeastFor {
				t.Fatalf("decided after %s, before the grace %s for the stop signal", took, tt.atLeastFor)
			}
		})
	}
}

func TestStopKillsAnEnvoyThatIgnoresSIGTERM(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	ready := make(chan struct{}, 1)
	proc, err := Binary{}.Start(envoy.Spec{Path: sh, Args: []string{"-c", `trap "" TERM; echo trapped; while :; do sleep 1; done`},
		Dir: t.TempDir(), Output: func(line string) {
			if line == "trapped" {
				ready <- struct{}{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop(0)
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the stand-in never trapped SIGTERM")
	}
	s, logs := testSupervisor(t)
	s.Grace = 300 * time.Millisecond
	s.Stop(proc, "stopped")
	if !proc.Exited() {
		t.Fatal("Envoy still runs after the stop")
	}
	if logs.FilterMessage("Envoy ignored SIGTERM; killed it").Len() != 1 {
		t.Fatalf("no word of the kill: %v", logs.All())
	}
	if logs.FilterMessage("Envoy stopped").Len() != 1 {
		t.Fatalf("no word of the stop: %v", logs.All())
	}
}

func TestStopAndRestart(t *testing.T) {
	tests := []struct {
		name     string
		exited   bool // Envoy was gone already
		ignores  bool
		wantLogs []string
		stops    int
	}{
		{name: "a running Envoy is stopped", wantLogs: []string{"Envoy stopped"}, stops: 1},
		{name: "one that ignores SIGTERM is killed", ignores: true, wantLogs: []string{"Envoy ignored SIGTERM; killed it", "Envoy stopped"}, stops: 1},
		{name: "one already gone is left alone", exited: true, stops: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := testSupervisor(t)
			proc := supervisetest.NewProc()
			proc.Ignores = tt.ignores
			if tt.exited {
				proc.Exit()
			}
			s.Stop(proc, "stopped")
			if proc.Stops != tt.stops {
				t.Fatalf("%d stops, want %d", proc.Stops, tt.stops)
			}
			var got []string
			for _, e := range logs.All() {
				got = append(got, e.Message)
			}
			if len(got) != len(tt.wantLogs) {
				t.Fatalf("logged %q, want %q", got, tt.wantLogs)
			}
			for i := range got {
				if got[i] != tt.wantLogs[i] {
					t.Fatalf("logged %q, want %q", got, tt.wantLogs)
				}
			}
		})
	}
	t.Run("a restart replaces the serving Envoy in its slot", func(t *testing.T) {
		s, _ := testSupervisor(t)
		old, next := supervisetest.NewProc(), supervisetest.NewProc()
		var between bool
		e := &Serving{Proc: old, Start: func() (Process, error) {
			if !old.Exited() {
				t.Error("the next Envoy started before the old one stopped")
			}
			return next, nil
		}}
		if err := s.Restart(e, func() { between = true }); err != nil {
			t.Fatal(err)
		}
		if e.Proc != next || !between {
			t.Fatalf("serving %v, in-between ran %v: want the next Envoy after the old one's stop", e.Proc, between)
		}
		e.Start = func() (Process, error) { return nil, errors.New("no binary") }
		if err := s.Restart(e, func() {}); err == nil || e.Proc != next {
			t.Fatalf("a failed start: err %v, serving %v; want the error and the stopped one kept", err, e.Proc)
		}
	})
}

func TestAwaitLive(t *testing.T) {
	tests := []struct {
		name       string
		live       func(call int) (string, bool, error)
		exit, stop bool
		want       bool
	}{
		{name: "LIVE after a few answers", live: func(c int) (string, bool, error) { return "PRE_INITIALIZING", c > 3, nil }, want: false},
		{name: "Envoy exits first", live: func(int) (string, bool, error) { return "", false, errors.New("refused") }, exit: true, want: true},
		{name: "a stop while waiting", live: func(int) (string, bool, error) { return "PRE_INITIALIZING", false, nil }, stop: true, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := testSupervisor(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			proc := supervisetest.NewProc()
			if tt.exit {
				proc.Exit()
			}
			if tt.stop {
				cancel()
			}
			got := s.AwaitLive(ctx, &supervisetest.Admin{Live: tt.live}, proc, func(time.Duration, string, error) {})
			if got != tt.want {
				t.Fatalf("exited = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStartAdoptsOnlyWhatCanBeAdopted(t *testing.T) {
	s, _ := testSupervisor(t)
	s.Envoy = startOnly{}
	if _, err := s.Start(envoy.Spec{}, &Adoption{PID: 1}); err == nil || err.Error() != "this Envoy cannot be taken over" {
		t.Fatalf("err = %v, want a refusal", err)
	}
	p, err := s.Start(envoy.Spec{}, nil)
	if err != nil || p == nil {
		t.Fatalf("start: %v, %v", p, err)
	}
}

type startOnly struct{ Envoy }

func (startOnly) Start(envoy.Spec) (Process, error) { return supervisetest.NewProc(), nil }

// Envoy's own lines keep their words and land at their level in the
// agent's log: a warning of Envoy's is a warning for the operator.
func TestEnvoyLinesKeepTheirLevel(t *testing.T) {
	tests := []struct {
		line string
		want zapcore.Level
	}{
		{"[2026-01-01 00:00:00.000][42][info][main] starting main dispatch loop", zapcore.InfoLevel},
		{"[2026-01-01 00:00:00.000][42][warning][config] gRPC config stream closed", zapcore.WarnLevel},
		{"[2026-01-01 00:00:00.000][42][error][upstream] cannot bind", zapcore.ErrorLevel},
		{"[2026-01-01 00:00:00.000][42][critical][main] error initializing", zapcore.ErrorLevel},
		{"[2026-01-01 00:00:00.000][42][debug][conn] new connection", zapcore.DebugLevel},
		{"[2026-01-01 00:00:00.000][42][trace][conn] bytes", zapcore.DebugLevel},
		{"a line in no format Envoy writes", zapcore.InfoLevel},
	}
	for _, tt := range tests {
		core, logs := observer.New(zap.DebugLevel)
		LogLine(zap.New(core), tt.line)
		all := logs.All()
		if len(all) != 1 || all[0].Level != tt.want || all[0].Message != tt.line {
			t.Errorf("%q logged as %+v, want one %s line with Envoy's words", tt.line, all, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	const tok = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJNZXNoIjoicGF5bWVudHMifQ.c2lnbmF0dXJl"
	tests := []struct {
		name, line, secret, want string
	}{
		{"Envoy's router header dump", "'authorization', '" + tok + "'", tok, "'authorization', '[redacted]'"},
		{"bearer value", "authorization: Bearer " + tok, tok, "authorization: Bearer [redacted]"},
		{"every occurrence", tok + " and again " + tok, tok, "[redacted] and again [redacted]"},
		{"the whole line", tok, tok, "[redacted]"},
		{"line without the token", "[info][main] starting main dispatch loop", tok, "[info][main] starting main dispatch loop"},
		{"a token prefix is not the token", "'authorization', '" + tok[:20] + "'", tok, "'authorization', '" + tok[:20] + "'"},
		{"no token known", "'authorization', 'x'", "", "'authorization', 'x'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.line, tt.secret); got != tt.want {
				t.Fatalf("Redact(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}
