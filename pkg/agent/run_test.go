package agent

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// agent.Run against the test control plane and a fake Envoy, for each way
// out its doc comment lists that a stop signal or Envoy decides.
func TestRunEndsAsItsDocSays(t *testing.T) {
	cp := testControlPlane(t)
	tests := []struct {
		name      string
		live      bool          // Envoy turns LIVE
		drainTime time.Duration // 0: a minute, which the test never waits out
		drive     func(t *testing.T, r *agentRun, proc *supervisetest.Proc)
		wantExit  int
		wantDrain bool // Envoy failed its health checks before it was stopped
		wantLog   string
	}{
		{
			name: "a stop while serving drains for the drain time, then stops Envoy", live: true, drainTime: time.Second,
			drive: func(_ *testing.T, r *agentRun, _ *supervisetest.Proc) {
				r.signal(syscall.SIGTERM)
			},
			wantDrain: true, wantLog: "drain time is over",
		},
		{
			name: "a second stop signal skips the rest of the drain", live: true,
			drive: func(t *testing.T, r *agentRun, proc *supervisetest.Proc) {
				r.signal(syscall.SIGTERM)
				// The listeners hold a connection: the drain lasts until
				// the drain time, unless a second signal cuts it short.
				testutil.Eventually(t, 30*time.Second, "the drain", func() bool { return !r.envoy.admin.drainedAt().IsZero() })
				if proc.Exited() {
					t.Fatal("Envoy stopped before the drain ended")
				}
				r.signal(syscall.SIGTERM)
			},
			wantDrain: true, wantLog: "second stop signal received; skipping the drain",
		},
		{
			name: "Envoy exiting by itself while serving fails the agent", live: true,
			drive:    func(_ *testing.T, _ *agentRun, proc *supervisetest.Proc) { proc.Exit() },
			wantExit: 1, wantLog: "Envoy exited unexpectedly",
		},
		{
			name: "a stop before Envoy is LIVE stops it without a drain", live: false,
			drive: func(t *testing.T, r *agentRun, _ *supervisetest.Proc) {
				r.signal(syscall.SIGINT)
			},
			wantLog: "Envoy stopped before Envoy was ready",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := runConfig(t, cp.URL(), cp.CACertFile())
			if tt.drainTime != 0 {
				cfg.DrainTime = tt.drainTime
			}
			fake := newFakeEnvoy(cfg)
			fake.admin.setLive(tt.live)
			r := startRun(t, cfg, fake)
			proc := fake.awaitStart(t)
			if tt.live {
				awaitPhase(t, r.a.tracker, state.Ready)
			} else {
				awaitPhase(t, r.a.tracker, state.EnvoyStarting)
			}
			// EnvoyStarting is said before the started Envoy is recorded
			// for the watchdog: await it rather than read it once.
			testutil.Eventually(t, 20*time.Second, "the watchdog to see the Envoy that runs as healthy", func() bool {
				e := r.a.sup.Now()
				return e != nil && e.Proc == proc && r.a.envoyHealthy(context.Background())
			})
			tt.drive(t, r, proc)
			err := r.result(t)
			if got := exitcode.Of(err); got != tt.wantExit {
				t.Fatalf("exit %d (%v), want %d", got, err, tt.wantExit)
			}
			if tt.wantExit == 1 && !errors.Is(err, ErrEnvoyExited) {
				t.Fatalf("%v, want ErrEnvoyExited", err)
			}
			if !proc.Exited() {
				t.Fatal("Envoy outlived Run")
			}
			if r.a.envoyHealthy(context.Background()) {
				t.Fatal("the watchdog takes an exited Envoy for healthy")
			}
			if drained := !fake.admin.drainedAt().IsZero(); drained != tt.wantDrain {
				t.Fatalf("drained %v, want %v", drained, tt.wantDrain)
			}
			if r.logs.FilterMessageSnippet(tt.wantLog).Len() == 0 {
				t.Fatalf("no %q in the log", tt.wantLog)
			}
			want := state.Stopped
			if tt.wantExit != 0 {
				want = state.Failed
			}
			if phase := r.a.tracker.Current().Phase; phase != want {
				t.Fatalf("phase %s after Run, want %s", phase, want)
			}
		})
	}
}

// SIGUSR2 is a maintenance drain: DRAINED, Envoy kept running; a stop
// then ends the agent cleanly.
func TestRunDrainsForMaintenanceOnSIGUSR2(t *testing.T) {
	cp := testControlPlane(t)
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	cfg.DrainTime = time.Second
	fake := newFakeEnvoy(cfg)
	fake.admin.setLive(true)
	r := startRun(t, cfg, fake)
	proc := fake.awaitStart(t)
	awaitPhase(t, r.a.tracker, state.Ready)
	r.sigs.maintenance <- syscall.SIGUSR2
	awaitPhase(t, r.a.tracker, state.Drained)
	if proc.Exited() {
		t.Fatal("the maintenance drain stopped Envoy")
	}
	r.signal(syscall.SIGTERM)
	if err := r.result(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A stop signal while `envoy --version` runs is a stop, not a broken
// --envoy-binary.
func TestRunStopWhileFindingEnvoyIsACleanStop(t *testing.T) {
	cp := testControlPlane(t)
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	fake := newFakeEnvoy(cfg)
	asked := make(chan struct{})
	fake.find = func(ctx context.Context) error {
		close(asked)
		<-ctx.Done()
		return errors.New("`envoy --version` failed (signal: killed)")
	}
	r := startRun(t, cfg, fake)
	<-asked
	r.signal(syscall.SIGHUP)
	if err := r.result(t); err != nil {
		t.Fatalf("Run: %v, want a clean stop", err)
	}
	if len(fake.started) != 0 {
		t.Fatal("Envoy was started")
	}
}

// A signal sent before Run reads its signals (while cli loads the
// configuration) still stops it.
func TestRunTakesAStopSignalSentBeforeIt(t *testing.T) {
	cp := testControlPlane(t)
	cfg := runConfig(t, cp.URL(), cp.CACertFile())
	fake := newFakeEnvoy(cfg)
	core := newSignals()
	core.stop <- syscall.SIGTERM
	a := New(Options{Config: cfg, Signals: core, Envoy: fake})
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run ignored the stop signal sent before it")
	}
}

// A bootstrap the control plane refuses for good is exit 78, before Envoy
// starts; one it may accept later is waited for.
func TestRunExitsConfigOnAPermanentRefusal(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		says   string
	}{
		{"the Dataplane is invalid", 422, "networking.address: must be a valid IP address", "rejected this zone proxy's Dataplane"},
		{"a token is required", 422, "Dataplane Token is required. Provide token when starting the data plane proxy.", "requires a dataplane token"},
		{"the Kuma API server port", 404, "404: Page Not Found", "has no /bootstrap endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, tt.body, tt.status)
			}))
			defer srv.Close()
			cfg := runConfig(t, srv.URL, caFileOf(t, srv.TLS))
			fake := newFakeEnvoy(cfg)
			r := startRun(t, cfg, fake)
			err := r.result(t)
			if got := exitcode.Of(err); got != exitcode.Config || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("exit %d: %v; want %d saying %q", got, err, exitcode.Config, tt.says)
			}
			if len(fake.started) != 0 {
				t.Fatal("Envoy was started")
			}
			if r.logs.FilterMessageSnippet("cannot run: ").Len() != 1 {
				t.Fatal("the refusal is not logged as a configuration problem")
			}
		})
	}
}

// caFileOf writes the test server's self-signed certificate as the CA.
func caFileOf(t *testing.T, c *tls.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	der := c.Certificates[0].Certificate[0]
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
