package inplace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// When a reload may happen, and whether it hands Envoy over or starts
// over: never during a drain or a stop, nor while Envoy starts.
func TestReloadIsDoneOnlyWhenItCanBe(t *testing.T) {
	realEnvoy := func(t *testing.T) supervise.Process {
		p, err := envoy.Start(envoy.Spec{Path: "/bin/sleep", Args: []string{"60"}, Output: func(string) {}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		return p
	}
	for _, tc := range []struct {
		name      string
		phase     state.Phase
		envoy     func(t *testing.T) supervise.Process // nil: none started yet
		serving   bool
		drained   bool
		stopAsked bool // a stop signal came, the phase not changed yet
		started   bool // the work dir and the listeners are open
		withEnvoy bool
		refusal   string // "" when the reload is done
		restart   bool   // refused as impossible: only a restart brings the new program in
	}{
		{name: "serving", phase: state.Ready, envoy: realEnvoy, serving: true, started: true, withEnvoy: true},
		{name: "no zone listener yet", phase: state.NoZoneListener, envoy: realEnvoy, serving: true, started: true, withEnvoy: true},
		{name: "waiting for the mesh", phase: state.WaitingForMesh, started: true},
		{name: "waiting for the control plane", phase: state.WaitingForControlPlane, started: true},
		{name: "before the listeners", phase: state.Starting, refusal: "still starting"},
		{name: "Envoy starting", phase: state.EnvoyStarting, envoy: realEnvoy, started: true, refusal: "Envoy is starting"},
		{name: "draining", phase: state.Draining, envoy: realEnvoy, serving: true, drained: true, started: true, refusal: "undrain"},
		{name: "drained", phase: state.Drained, envoy: realEnvoy, serving: true, drained: true, started: true, refusal: "undrain"},
		{name: "stopping", phase: state.Terminating, envoy: realEnvoy, started: true, refusal: "stopping"},
		{name: "a stop signal just came", phase: state.Ready, envoy: realEnvoy, serving: true, stopAsked: true, started: true, refusal: "stopping"},
		{name: "an Envoy that cannot be handed over", phase: state.Ready, envoy: func(*testing.T) supervise.Process { return newFakeProc() }, serving: true, started: true, refusal: "cannot be handed over", restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newHost(&config.Config{}, nil)
			a.tracker.Set(tc.phase, "test")
			if tc.envoy != nil {
				a.sup.Started(supervise.Current{Proc: tc.envoy(t)})
			}
			a.serving.Store(tc.serving)
			a.drained.Store(tc.drained)
			a.stopAsked.Store(tc.stopAsked)
			if tc.started {
				a.KeepWorkDir(upgrade.Dir{}, false)
				a.keepListener("--readiness-port", nil)
			}
			withEnvoy, err := a.reloadable()
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refusal != "" && (err == nil || !errors.Is(err, upgrade.ErrReloadRefused) || !strings.Contains(err.Error(), tc.refusal)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.refusal)
			case err == nil && withEnvoy != tc.withEnvoy:
				t.Fatalf("with Envoy %v, want %v", withEnvoy, tc.withEnvoy)
			case errors.As(err, new(upgrade.CannotReload)) != tc.restart:
				t.Fatalf("%v: only a restart lifts it: %v, want %v", err, !tc.restart, tc.restart)
			}
		})
	}
}

// A reload that comes while Envoy is being started or adopted (a second
// reload right after one) waits for it, a bounded time, instead of being
// refused: a SIGHUP has nobody to tell to try again.
func TestAReloadWaitsForAStartUnderWay(t *testing.T) {
	defer func(d time.Duration) { reloadStartWait = d }(reloadStartWait)
	for _, tc := range []struct {
		name     string
		servesIn time.Duration // 0: never
		refusal  string
	}{
		{"Envoy serves meanwhile", 100 * time.Millisecond, "cannot take over"}, // got as far as checking the new program
		{"Envoy does not serve in time", 0, "Envoy is starting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reloadStartWait = 500 * time.Millisecond
			a := newHost(&config.Config{}, nil)
			a.exe, a.args = "/nonexistent/zoneproxy", []string{"/nonexistent/zoneproxy", "run"}
			a.tracker.Set(state.EnvoyStarting, "test")
			p, err := envoy.Start(envoy.Spec{Path: "/bin/sleep", Args: []string{"60"}, Output: func(string) {}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Kill)
			a.sup.Started(supervise.Current{Proc: p})
			a.KeepWorkDir(upgrade.Dir{}, false)
			a.keepListener("--readiness-port", nil)
			if tc.servesIn > 0 {
				time.AfterFunc(tc.servesIn, func() { a.tracker.Set(state.Ready, "test"); a.serving.Store(true) })
			}
			_, err = a.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("got %v, want %q", err, tc.refusal)
			}
		})
	}
}

// A second reload while one is under way is refused at once, not queued
// behind the exec.
func TestASecondReloadIsRefusedWhileOneIsUnderWay(t *testing.T) {
	a := newHost(&config.Config{}, nil) // its metrics not registered yet, as before run
	a.mu.Lock()                         // the first reload, between its decision and its exec
	defer a.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := a.Reload(); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, upgrade.ErrReloadRefused) || !strings.Contains(err.Error(), "under way") {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second reload waits for the first")
	}
}

// An exec that fails leaves the agent whole: the error names the binary,
// and the files handed for it are usable again.
func TestAFailedReplacementReturns(t *testing.T) {
	a := newHost(&config.Config{}, nil)
	a.exe, a.args = "/nonexistent/zoneproxy", []string{"/nonexistent/zoneproxy", "run"}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	err = a.replace(&upgrade.State{Version: upgrade.Version, Generation: 1}, upgrade.HandedFiles{"pipe": {F: r}}, nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/zoneproxy") || !strings.Contains(err.Error(), "goes on serving") {
		t.Fatalf("got %v", err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("the handed file after the failed exec: %d, %v", n, err)
	}
}

// A stop asked while the reload readied the exec is asked about last,
// just before the exec: the reload gives way and the agent stays.
func TestAStopAskedAtTheLastMomentStopsTheExec(t *testing.T) {
	a := newHost(&config.Config{}, nil)
	// A program that passes the trust check, so that the last check is
	// reached; it refuses, so nothing is run.
	a.exe, a.args = "/usr/bin/true", []string{"/usr/bin/true"}
	stop := errors.New("a stop was asked meanwhile")
	err := a.replace(&upgrade.State{Version: upgrade.Version, Generation: 1}, upgrade.HandedFiles{}, func() error { return fmt.Errorf("%w: %w", upgrade.ErrReloadRefused, stop) })
	if !errors.Is(err, stop) {
		t.Fatalf("got %v, want the refusal from the last check, before any exec", err)
	}
}

// A reload keeps what the proxy is; Envoy's launch it applies through a
// handover, the rest in the agent.
func TestEnvoyFixedNamesWhatARestartMustApply(t *testing.T) {
	base := func() *config.Config {
		return &config.Config{Mesh: "payments", Role: "egress", Name: "zp", EgressPort: 10002, Labels: map[string]string{"a": "1", "b": "2"},
			WorkDir: "/run/zoneproxy/zp", XDSRelay: true, DrainTime: 30 * time.Second}
	}
	for _, tc := range []struct {
		name   string
		change func(c *config.Config)
		want   string
	}{
		{"nothing", func(*config.Config) {}, ""},
		{"the drain time and log level", func(c *config.Config) { c.DrainTime, c.LogLevel = time.Minute, "debug" }, ""},
		{"the egress port", func(c *config.Config) { c.EgressPort = 10003 }, "--egress-port"},
		{"a label", func(c *config.Config) { c.Labels["b"] = "3" }, "--label"},
		{"the relay and the work dir", func(c *config.Config) { c.XDSRelay, c.WorkDir = false, "/tmp/zp" }, "--work-dir, --xds-relay"},
		{"Envoy's launch: a handover applies it", func(c *config.Config) {
			c.EnvoyArgs, c.Concurrency, c.EnvoyLogLevel, c.EnvoyBinary = []string{"--x"}, 4, "debug", "/opt/envoy"
		}, ""},
		{"a label, with Envoy's launch", func(c *config.Config) { c.Labels["b"], c.Concurrency = "3", 4 }, "--label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := base()
			tc.change(next)
			if got := strings.Join(identityChanges(EnvoyFixed(base()), EnvoyFixed(next)), ", "); got != tc.want {
				t.Fatalf("changes %q, want %q", got, tc.want)
			}
		})
	}
}
