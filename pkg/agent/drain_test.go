package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

func testAgent(t *testing.T, cfg *config.Config) (*Agent, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return New(Options{Config: cfg, Log: zap.New(core), Tracker: state.NewTracker()}), logs
}

func TestDrainDecisions(t *testing.T) {
	never := func(int) (int, error) { return 1, nil }
	idle := func(int) (int, error) { return 0, nil }
	tests := []struct {
		name      string
		drainTime time.Duration
		drainMin  time.Duration
		counts    func(call int) (int, error)
		failErr   error
		skipDrain bool // a second stop signal came
		exit      bool
		want      supervise.DrainEnd
		atLeast   time.Duration // the drain may not end sooner
	}{
		{name: "idle listeners end the drain after the quiet period", drainTime: time.Minute, counts: idle, want: supervise.DrainIdle, atLeast: supervise.DrainQuiet},
		{name: "but not before --drain-min", drainTime: time.Minute, drainMin: 3 * time.Second, counts: idle, want: supervise.DrainIdle, atLeast: 3 * time.Second},
		{name: "--drain-min is capped at --drain-time", drainTime: 1500 * time.Millisecond, drainMin: time.Hour, counts: never, want: supervise.DrainTimeUp, atLeast: 1500 * time.Millisecond},
		{name: "a connection keeps it open until the drain time is over", drainTime: 2 * time.Second, counts: never, want: supervise.DrainTimeUp, atLeast: 2 * time.Second},
		{name: "a single zero between connections is not idle", drainTime: 2 * time.Second, counts: func(c int) (int, error) { return c % 2, nil }, want: supervise.DrainTimeUp, atLeast: 2 * time.Second},
		{name: "an unreadable count is not idle", drainTime: 2 * time.Second, counts: func(int) (int, error) { return 0, errors.New("admin gone") }, want: supervise.DrainTimeUp, atLeast: 2 * time.Second},
		{name: "connections that close end it once quiet", drainTime: time.Minute, counts: func(c int) (int, error) { return max(0, 3-c), nil }, want: supervise.DrainIdle, atLeast: supervise.DrainQuiet},
		{name: "a second signal skips the rest", drainTime: time.Minute, counts: never, skipDrain: true, want: supervise.DrainSkipped},
		{name: "Envoy exiting ends it", drainTime: time.Minute, counts: never, exit: true, want: supervise.DrainEnvoyExited},
		{name: "no admin API: stop now", drainTime: time.Minute, counts: never, failErr: errors.New("refused"), want: supervise.DrainNoAdmin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, _ := testAgent(t, &config.Config{DrainTime: tt.drainTime, DrainMin: tt.drainMin})
			if tt.skipDrain {
				close(a.skipDrain)
			}
			admin := &supervisetest.Admin{Counts: tt.counts, FailErr: tt.failErr}
			proc := supervisetest.NewProc()
			if tt.exit {
				proc.Exit()
			}
			start := time.Now()
			got := a.drain(admin, proc, tt.drainMin)
			took := time.Since(start)
			if got != tt.want {
				t.Fatalf("drain ended with %q, want %q", got, tt.want)
			}
			if took < tt.atLeast {
				t.Fatalf("drain ended after %s, before %s", took, tt.atLeast)
			}
			if snap := a.tracker.Current(); snap.Phase != state.Terminating {
				t.Fatalf("phase %s during the drain, want TERMINATING", snap.Phase)
			}
		})
	}
}

func TestDrainLogsCountsAtDebugAndErrorsOnceAtWarn(t *testing.T) {
	a, logs := testAgent(t, &config.Config{DrainTime: 1200 * time.Millisecond})
	admin := &supervisetest.Admin{Counts: func(c int) (int, error) {
		if c <= 3 {
			return 0, errors.New("connection refused")
		}
		return 2, nil
	}}
	a.drain(admin, supervisetest.NewProc(), 0)
	if n := logs.FilterMessage("cannot read Envoy's connection count during the drain").Len(); n != 1 {
		t.Errorf("%d warnings for one repeated error, want 1", n)
	}
	if logs.FilterMessage("draining").FilterField(zap.Int("connections", 2)).Len() == 0 {
		t.Error("the connection count is not logged at debug")
	}
}

func TestEnvoyExitDuringAStopIsACleanStop(t *testing.T) {
	tests := []struct {
		name       string
		cancelled  bool // the agent's stop signal came first
		lateSignal bool // it comes just after Envoy's exit
		bySignal   bool // Envoy ended as if told to stop
		wantErr    bool
	}{
		{name: "stop signal first", cancelled: true, wantErr: false},
		{name: "Envoy stopped first, signal follows", lateSignal: true, bySignal: true, wantErr: false},
		{name: "Envoy stopped by an outside SIGTERM, no stop signal", bySignal: true, wantErr: true},
		{name: "Envoy crashed", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, logs := testAgent(t, &config.Config{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelled {
				cancel()
			}
			proc := supervisetest.NewProc()
			if tt.lateSignal {
				proc.OnAsked = cancel
			}
			proc.BySignal = tt.bySignal
			proc.Exit()
			err := a.envoyExited(ctx, proc)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			clean := logs.FilterMessage("Envoy stopped before the drain finished").Len() == 1
			if clean == tt.wantErr {
				t.Fatalf("clean-stop log line present = %v\n%v", clean, logs.All())
			}
			if tt.wantErr && !errors.Is(err, ErrEnvoyExited) {
				t.Fatalf("err = %v, want ErrEnvoyExited", err)
			}
		})
	}
}
