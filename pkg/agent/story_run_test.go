package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// The story an operator follows on /status and in the log: waiting for a
// mesh that does not exist yet (a SIGUSR2 meanwhile has nothing to
// drain), READY once it is created, a maintenance drain and an undrain
// (a new Envoy), and a clean stop.
func TestRunWaitsForTheMeshServesDrainsAndUndrains(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{Dir: t.TempDir(), AuthDisabled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Close() })
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	cfg.DrainTime = time.Second
	fake := newFakeEnvoy(cfg)
	fake.admin.setLive(true)
	r := startRun(t, cfg, fake)

	snap := awaitPhase(t, r.a.tracker, state.WaitingForMesh)
	if !strings.Contains(snap.Detail, `waiting for mesh "payments" (attempt `) {
		t.Fatalf("WAITING_FOR_MESH says %q", snap.Detail)
	}
	r.sigs.maintenance <- syscall.SIGUSR2
	testutil.Eventually(t, 20*time.Second, "SIGUSR2's refusal in the log", func() bool {
		return r.logs.FilterMessageSnippet("SIGUSR2: cannot drain: not serving yet (WAITING_FOR_MESH").FilterLevelExact(zap.WarnLevel).Len() == 1
	})
	if st := r.a.Status(); st.Envoy != nil || st.Drain != "" {
		t.Fatalf("status before Envoy: %+v", st)
	}

	cp.CreateMesh("payments")
	first := fake.awaitStart(t)
	awaitPhase(t, r.a.tracker, state.Ready)
	st := r.a.Status()
	if st.Phase != "READY" || st.Envoy == nil || st.Envoy.PID != first.PID() || st.Envoy.Build != "fake/1.39.0/Clean/RELEASE/BoringSSL" {
		t.Fatalf("status while serving: %+v (envoy %+v)", st, st.Envoy)
	}
	if !strings.Contains(st.ControlPlane.Says, "Envoy talks to the control plane directly") {
		t.Errorf("direct mode's control plane words: %q", st.ControlPlane.Says)
	}
	if r.logs.FilterMessageSnippet("received bootstrap").Len() != 1 {
		t.Error("the bootstrap is not logged")
	}

	r.sigs.maintenance <- syscall.SIGUSR2
	awaitPhase(t, r.a.tracker, state.Drained)
	if st := r.a.Status(); st.Drain != "maintenance" || st.Phase != "DRAINED" {
		t.Fatalf("status while drained: %+v", st)
	}
	if r.logs.FilterMessageSnippet("SIGUSR2: draining for maintenance").Len() != 1 {
		t.Error("SIGUSR2's drain is not logged")
	}
	r.a.Undrain()
	second := fake.awaitStart(t)
	awaitPhase(t, r.a.tracker, state.Ready)
	if !first.Exited() || second.Exited() {
		t.Fatalf("after the undrain: first Envoy exited %v, second %v; want only the first", first.Exited(), second.Exited())
	}
	if st := r.a.Status(); st.Drain != "" {
		t.Errorf("status after the undrain: drain %q", st.Drain)
	}

	r.signal(syscall.SIGTERM)
	if err := r.result(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if phase := r.a.tracker.Current().Phase; phase != state.Stopped {
		t.Fatalf("phase %s after the stop", phase)
	}
}

// What ends Run before or while Envoy starts, and with which exit code.
func TestRunEndsBeforeServing(t *testing.T) {
	cp := testControlPlane(t)
	tests := []struct {
		name string
		// setup changes the configuration; drive acts once Run is under way.
		setup    func(t *testing.T, cfg *config.Config)
		drive    func(t *testing.T, r *agentRun)
		wantExit int
		wantErr  string // in Run's error
		wantLog  string
		started  bool // an Envoy was started
	}{
		{
			name: "a stop while the control plane does not answer is a clean stop",
			setup: func(t *testing.T, cfg *config.Config) {
				cfg.CPAddress = fmt.Sprintf("https://127.0.0.1:%d", testutil.FreePort(t))
			},
			drive: func(t *testing.T, r *agentRun) {
				snap := awaitPhase(t, r.a.tracker, state.WaitingForControlPlane)
				if !strings.Contains(snap.Detail, "waiting for the control plane (attempt ") {
					t.Errorf("WAITING_FOR_CONTROL_PLANE says %q", snap.Detail)
				}
				r.signal(syscall.SIGTERM)
			},
			wantLog: "stopped while waiting for the control plane",
		},
		{
			name: "Envoy exiting before it is LIVE fails the agent (exit 1)",
			drive: func(t *testing.T, r *agentRun) {
				proc := r.envoy.awaitStart(t)
				awaitPhase(t, r.a.tracker, state.EnvoyStarting)
				proc.Exit()
			},
			wantExit: 1, wantErr: ErrEnvoyExited.Error(), wantLog: "Envoy exited unexpectedly", started: true,
		},
		{
			name: "the readiness port in use may be freed (exit 1)",
			setup: func(t *testing.T, cfg *config.Config) {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.ReadinessPort))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
			},
			wantExit: 1, wantErr: "readiness-port", wantLog: "failed: ",
		},
		{
			name: "a state dir another agent holds is the configuration's (exit 78)",
			setup: func(t *testing.T, cfg *config.Config) {
				cfg.StateDir = filepath.Join(t.TempDir(), "state")
				d, err := securedir.Open(cfg.StateDir, "--state-dir", true)
				if err != nil {
					t.Fatal(err)
				}
				lock, err := d.Lock()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Unlock(lock); d.Close() })
			},
			wantExit: exitcode.Config, wantErr: "give each zone proxy its own --state-dir", wantLog: "cannot run: ",
		},
		{
			name: "a state dir others may write is the configuration's (exit 78)",
			setup: func(t *testing.T, cfg *config.Config) {
				cfg.StateDir = filepath.Join(t.TempDir(), "state")
				if err := os.Mkdir(cfg.StateDir, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(cfg.StateDir, 0o777); err != nil {
					t.Fatal(err)
				}
			},
			wantExit: exitcode.Config, wantErr: "the state dir holds the configuration served to Envoy", wantLog: "cannot run: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := runConfig(t, cp.URL(), cp.CACertFile())
			if tt.setup != nil {
				tt.setup(t, cfg)
			}
			fake := newFakeEnvoy(cfg)
			r := startRun(t, cfg, fake)
			if tt.drive != nil {
				tt.drive(t, r)
			}
			err := r.result(t)
			if got := exitcode.Of(err); got != tt.wantExit || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("exit %d (%v), want %d saying %q", got, err, tt.wantExit, tt.wantErr)
			}
			if r.logs.FilterMessageSnippet(tt.wantLog).Len() == 0 {
				t.Errorf("no %q in the log", tt.wantLog)
			}
			if started := len(fake.started) > 0 || tt.started; started != tt.started {
				t.Errorf("Envoy started %v, want %v", started, tt.started)
			}
			want := state.Stopped
			if tt.wantExit != 0 {
				want = state.Failed
			}
			if snap := r.a.tracker.Current(); snap.Phase != want || (tt.wantExit != 0 && !strings.Contains(snap.Detail, tt.wantErr)) {
				t.Errorf("phase %s (%s) after Run, want %s", snap.Phase, snap.Detail, want)
			}
		})
	}
}

// A state dir the file system refuses leaves the agent without a cache,
// not without Envoy: a warning, and it serves.
func TestRunServesWithoutAStateDirItCannotUse(t *testing.T) {
	cp := testControlPlane(t)
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = filepath.Join(file, "state")
	fake := newFakeEnvoy(cfg)
	fake.admin.setLive(true)
	r := startRun(t, cfg, fake)
	awaitPhase(t, r.a.tracker, state.Ready)
	if r.logs.FilterMessageSnippet("cannot use the state dir; running without a last-known-good configuration").Len() != 1 {
		t.Error("the unusable state dir is not warned about")
	}
	r.stopNow(t)
}

// otherBuildEnvoy's admin reports another build than `envoy --version`
// told: a wrapper whose Envoy was upgraded.
type otherBuildEnvoy struct{ *fakeEnvoy }

type otherBuildAdmin struct{ *fakeEnvoyAdmin }

func (o otherBuildEnvoy) Admin(envoy.AdminAddress) EnvoyAdmin { return otherBuildAdmin{o.admin} }

const upgradedBuild = "fake/1.40.0/Clean/RELEASE/BoringSSL"

func (otherBuildAdmin) Build(context.Context) (string, error) { return upgradedBuild, nil }

// The build the running Envoy reports wins over the one the version
// cache told: /status shows it, the log says so, and the state dir keeps
// it for the next start.
func TestRunTakesTheBuildTheRunningEnvoyReports(t *testing.T) {
	cp := testControlPlane(t)
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	fake := newFakeEnvoy(cfg)
	fake.admin.setLive(true)
	r := startRunWith(t, cfg, fake, otherBuildEnvoy{fake})
	awaitPhase(t, r.a.tracker, state.Ready)
	testutil.Eventually(t, 20*time.Second, "the running build in /status", func() bool {
		st := r.a.Status()
		return st.Envoy != nil && st.Envoy.Build == upgradedBuild
	})
	if r.logs.FilterMessageSnippet("the running Envoy reports another build than the control plane was told").Len() != 1 {
		t.Error("the other build is not warned about")
	}
	r.stopNow(t)
}

// An Envoy that stays short of LIVE is explained: after a while /ready
// says it waits for its configuration from the control plane, and the log
// says so too.
func TestRunSaysWhyEnvoyIsNotLiveYet(t *testing.T) {
	t.Parallel() // it waits for supervise.WaitHint
	cp := testControlPlane(t)
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	fake := newFakeEnvoy(cfg)
	r := startRun(t, cfg, fake)
	fake.awaitStart(t)
	testutil.Eventually(t, supervise.WaitHint+60*time.Second, "WAITING_FOR_CONTROL_PLANE", func() bool {
		return r.a.tracker.Current().Phase == state.WaitingForControlPlane
	})
	if d := r.a.tracker.Current().Detail; !strings.Contains(d, "Envoy is running but waits for its configuration from the control plane (PRE_INITIALIZING for ") {
		t.Errorf("WAITING_FOR_CONTROL_PLANE says %q", d)
	}
	if r.logs.FilterMessage("Envoy is not ready yet").FilterLevelExact(zap.WarnLevel).Len() != 1 {
		t.Error("the wait is not warned about")
	}
	fake.admin.setLive(true)
	awaitPhase(t, r.a.tracker, state.Ready)
}

// failingEnvoy starts the first Envoy only; later ones fail to start.
type failingEnvoy struct {
	*fakeEnvoy
	starts int
}

var errNoStart = errors.New("fork/exec /fake/envoy: resource temporarily unavailable")

func (f *failingEnvoy) Start(spec envoy.Spec) (EnvoyProcess, error) {
	f.starts++
	if f.starts > 1 {
		return nil, errNoStart
	}
	return f.fakeEnvoy.Start(spec)
}

// An undrain whose new Envoy cannot start fails the agent, so that
// systemd restarts it, rather than leaving it up with no Envoy.
func TestRunFailsWhenTheUndrainsEnvoyCannotStart(t *testing.T) {
	cp := testControlPlane(t)
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	cfg.DrainTime = time.Second
	fake := newFakeEnvoy(cfg)
	fake.admin.setLive(true)
	r := startRunWith(t, cfg, fake, &failingEnvoy{fakeEnvoy: fake})
	first := fake.awaitStart(t)
	awaitPhase(t, r.a.tracker, state.Ready)
	if err := r.a.Drain(); err != nil {
		t.Fatal(err)
	}
	awaitPhase(t, r.a.tracker, state.Drained)
	r.a.Undrain()
	err := r.result(t)
	if !errors.Is(err, errNoStart) || exitcode.Of(err) == 0 {
		t.Fatalf("Run: %v (exit %d), want the start's error", err, exitcode.Of(err))
	}
	if !first.Exited() {
		t.Fatal("the drained Envoy still runs")
	}
	if snap := r.a.tracker.Current(); snap.Phase != state.Failed {
		t.Fatalf("phase %s after Run, want FAILED", snap.Phase)
	}
}

// stopNow stops Run with two stop signals (no drain) and awaits a clean stop.
func (r *agentRun) stopNow(t *testing.T) {
	t.Helper()
	r.signal(syscall.SIGTERM)
	r.signal(syscall.SIGTERM)
	if err := r.result(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
