package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise/supervisetest"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// fakeEnvoy is an Envoy that agent.Run drives in a test: it starts at
// once, its admin API says LIVE once live is set, its listeners hold one
// connection (so a drain lasts unless cut short), and it exits when
// stopped or told to.
type fakeEnvoy struct {
	find    func(ctx context.Context) error // nil finds Envoy 1.39.0
	started chan *supervisetest.Proc        // each Envoy started
	admin   *fakeEnvoyAdmin
}

func newFakeEnvoy(cfg *config.Config) *fakeEnvoy {
	return &fakeEnvoy{started: make(chan *supervisetest.Proc, 4), admin: &fakeEnvoyAdmin{want: listenwatch.Expected(cfg)}}
}

func (f *fakeEnvoy) Find(ctx context.Context, _, _ string) (string, envoy.FoundVersion, error) {
	if f.find != nil {
		if err := f.find(ctx); err != nil {
			return "", envoy.FoundVersion{}, err
		}
	}
	return "/fake/envoy", envoy.FoundVersion{Version: envoy.Version{Version: "1.39.0", Build: "fake/1.39.0/Clean/RELEASE/BoringSSL"}}, nil
}

func (f *fakeEnvoy) Start(envoy.Spec) (EnvoyProcess, error) {
	p := supervisetest.NewProc()
	f.started <- p
	return p, nil
}

func (f *fakeEnvoy) Admin(envoy.AdminAddress) EnvoyAdmin { return f.admin }

// awaitStart returns the next Envoy started.
func (f *fakeEnvoy) awaitStart(t *testing.T) *supervisetest.Proc {
	t.Helper()
	select {
	case p := <-f.started:
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("Envoy was not started")
		return nil
	}
}

type fakeEnvoyAdmin struct {
	want []listenwatch.Zone

	mu             sync.Mutex
	live           bool
	unreachable    bool
	failedChecksAt time.Time // when FailHealthChecks was called: the drain began
}

func (f *fakeEnvoyAdmin) setLive(live bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live = live
}

func (f *fakeEnvoyAdmin) drainedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failedChecksAt
}

var errAdminDown = errors.New("connect: connection refused")

func (f *fakeEnvoyAdmin) Ready(context.Context) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.unreachable:
		return "", false, errAdminDown
	case f.live:
		return "LIVE", true, nil
	}
	return "PRE_INITIALIZING", false, nil
}

func (f *fakeEnvoyAdmin) FailHealthChecks(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failedChecksAt = time.Now()
	return nil
}

func (f *fakeEnvoyAdmin) DrainListeners(context.Context) error               { return nil }
func (f *fakeEnvoyAdmin) StopListeners(context.Context) error                { return nil }
func (f *fakeEnvoyAdmin) DownstreamConnections(context.Context) (int, error) { return 1, nil }
func (f *fakeEnvoyAdmin) Listeners(context.Context) ([]envoy.Listener, error) {
	var out []envoy.Listener
	for _, l := range f.want {
		out = append(out, envoy.Listener{Name: l.Name, Address: l.Addr})
	}
	return out, nil
}
func (f *fakeEnvoyAdmin) SetLogLevel(context.Context, string, string) error { return nil }
func (f *fakeEnvoyAdmin) Build(context.Context) (string, error) {
	return "fake/1.39.0/Clean/RELEASE/BoringSSL", nil
}
func (f *fakeEnvoyAdmin) PrometheusStats(context.Context) (string, error) { return "", nil }
func (f *fakeEnvoyAdmin) Close()                                          {}

// runConfig is an egress of mesh "payments" on loopback, in direct mode,
// against cpURL.
func runConfig(t *testing.T, cpURL, caFile string) *config.Config {
	t.Helper()
	// Envoy's admin socket lives in the work dir: a short path.
	dir, err := os.MkdirTemp("", "zp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return &config.Config{
		Mesh: "payments", Role: config.RoleEgress, Name: "zp-test", Address: "127.0.0.1",
		EgressPort: testutil.FreePort(t), AdminPort: config.DefaultAdminPort, ReadinessPort: testutil.FreePort(t),
		CPAddress: cpURL, CACertFile: caFile, EnvoyBinary: "envoy", WorkDir: filepath.Join(dir, "wd"),
		DrainTime: time.Minute, EnvoyLogLevel: "info", RetryInitial: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
	}
}

// testControlPlane serves mesh "payments" without tokens.
func testControlPlane(t *testing.T) *controlplane.Server {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{Dir: t.TempDir(), Meshes: []string{"payments"}, AuthDisabled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Close() })
	return cp
}

// agentRun is agent.Run under way, with signals the test sends.
type agentRun struct {
	a     *Agent
	envoy *fakeEnvoy
	sigs  *Signals
	logs  *observer.ObservedLogs
	done  chan error
}

func startRun(t *testing.T, cfg *config.Config, fake *fakeEnvoy) *agentRun {
	t.Helper()
	return startRunWith(t, cfg, fake, fake)
}

// startRunWith runs the agent on e, an Envoy made of fake.
func startRunWith(t *testing.T, cfg *config.Config, fake *fakeEnvoy, e Envoy) *agentRun {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	r := &agentRun{envoy: fake, sigs: newSignals(), logs: logs, done: make(chan error, 1)}
	r.a = New(Options{Config: cfg, Log: zap.New(core), Signals: r.sigs, Envoy: e})
	go func() { r.done <- r.a.Run(context.Background()) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.signal(syscall.SIGTERM)
			r.signal(syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(30 * time.Second):
				t.Error("two stop signals did not end Run")
			}
		}
	})
	return r
}

func (r *agentRun) signal(sig os.Signal) { r.sigs.stop <- sig }

// result is Run's error, which must come within a bound well below the
// one-minute drain.
func (r *agentRun) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the clean-up
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return; phase %s", r.a.tracker.Current().Phase)
		return nil
	}
}
