package agent

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/host/sdjob"
)

// The stop signal is read as a restart only when asked for: SIGUSR1, or
// systemd's job for the unit; anything else, and any doubt, is a stop.
func TestAStopIsARestartOnlyWhenAskedFor(t *testing.T) {
	for _, tt := range []struct {
		name      string
		systemd   bool
		sig       os.Signal
		job       bool
		jobErr    error
		want      bool
		wantAsked bool
		wantWarn  bool
	}{
		{name: "SIGUSR1 outside systemd", sig: syscall.SIGUSR1, want: true},
		{name: "SIGTERM outside systemd", sig: syscall.SIGTERM},
		{name: "systemctl restart", systemd: true, sig: syscall.SIGTERM, job: true, want: true, wantAsked: true},
		{name: "systemctl stop", systemd: true, sig: syscall.SIGTERM, wantAsked: true},
		{name: "no answer over D-Bus", systemd: true, sig: syscall.SIGTERM, jobErr: errors.New("no bus"), wantAsked: true, wantWarn: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("INVOCATION_ID", "")
			if tt.systemd {
				t.Setenv("INVOCATION_ID", "0123")
			}
			a, logs := testAgent(t, &config.Config{Role: config.RoleEgress})
			asked := false
			a.opts.StopJob = func(context.Context) (bool, error) { asked = true; return tt.job, tt.jobErr }
			a.stopAs.read(tt.sig, a.opts.StopJob, a.log)
			k := a.stopAs.wait()
			if k.restart != tt.want || asked != tt.wantAsked {
				t.Fatalf("restart %t (asked systemd: %t, %s), want %t (%t)", k.restart, asked, k.why, tt.want, tt.wantAsked)
			}
			if warned := logs.FilterMessage("cannot ask systemd whether this stop is a restart; taking it for a stop").Len() == 1; warned != tt.wantWarn {
				t.Fatalf("warned %t, want %t", warned, tt.wantWarn)
			}
		})
	}
}

// A restart of an egress drains only the connections in flight: no load
// balancer watches it, so --drain-min would only delay the restart. An
// ingress's load balancer still needs --drain-min to see the failing
// health check.
func TestARestartsDrainWaitsDrainMinOnlyForALoadBalancer(t *testing.T) {
	for _, tt := range []struct {
		role    config.Role
		atLeast time.Duration
		atMost  time.Duration
	}{
		{role: config.RoleEgress, atMost: 4 * time.Second},
		{role: config.RoleIngress, atLeast: 5 * time.Second},
		{role: config.RoleCombined, atLeast: 5 * time.Second},
	} {
		t.Run(string(tt.role), func(t *testing.T) {
			t.Parallel()
			a, logs := testAgent(t, &config.Config{Role: tt.role, DrainMin: 5 * time.Second, DrainTime: time.Minute})
			a.stopAs.settle(stopKind{restart: true, why: "test"})
			admin := &maintAdmin{Admin: supervisetest.Admin{Counts: func(int) (int, error) { return 0, nil }}}
			start := time.Now()
			a.stopServing(&supervised{Admin: admin, Proc: supervisetest.NewProc()})
			took := time.Since(start)
			if took < tt.atLeast || (tt.atMost > 0 && took > tt.atMost) {
				t.Fatalf("the restart's drain took %s, want between %s and %s", took, tt.atLeast, tt.atMost)
			}
			if logs.FilterMessageSnippet("restart: ").Len() == 0 {
				t.Fatal("the journal does not say it was a restart")
			}
		})
	}
}

// A stop that no signal asked for (Run's context cancelled) is a stop, and
// does not wait for an answer that never comes.
func TestAStopWithoutASignalIsAStopAtOnce(t *testing.T) {
	a, _ := testAgent(t, &config.Config{Role: config.RoleEgress})
	start := time.Now()
	if k := a.stopAs.wait(); k.restart {
		t.Fatalf("a restart (%s)", k.why)
	}
	if took := time.Since(start); took >= sdjob.AskTimeout {
		t.Fatalf("waited %s for the stop's kind", took)
	}
}
