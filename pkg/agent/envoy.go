package agent

import (
	"context"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// Envoy is how the agent finds, starts and talks to Envoy. Options.Envoy
// nil is the binary --envoy-binary names, run through pkg/envoy; tests
// give a fake one.
type Envoy interface {
	// Find resolves binary (a path, or a name on PATH) and reads its
	// version, kept in stateDir's version cache ("" for none).
	Find(ctx context.Context, binary, stateDir string) (path string, found envoy.FoundVersion, err error)
	// Start launches Envoy as spec says.
	Start(spec envoy.Spec) (EnvoyProcess, error)
	// Admin is a client of the admin API Envoy's bootstrap puts at addr.
	Admin(addr envoy.AdminAddress) EnvoyAdmin
}

// EnvoyProcess is the running Envoy as the agent supervises it.
type EnvoyProcess interface {
	PID() int
	// Done is closed once Envoy has exited.
	Done() <-chan struct{}
	Exited() bool
	// ExitDescription says how it ended, e.g. "exit status 1"; after Done.
	ExitDescription() string
	// StoppedBySignal: it ended as Envoy does when asked to stop (status
	// 0, SIGTERM, SIGINT), not by a crash; after Done.
	StoppedBySignal() bool
	// Stop sends SIGTERM, SIGKILL after grace, and returns once it is gone.
	Stop(grace time.Duration) (killed bool)
}

// EnvoyAdmin is what the agent asks of Envoy's admin API.
type EnvoyAdmin interface {
	drainAdmin
	listenerLister
	SetLogLevel(ctx context.Context, component, level string) error
	// Build is the build Envoy reports, as `envoy --version` prints it.
	Build(ctx context.Context) (string, error)
	PrometheusStats(ctx context.Context) (string, error)
	Close()
}

// drainAdmin is the part of the admin API that the wait for LIVE and the
// drains use.
type drainAdmin interface {
	Ready(ctx context.Context) (word string, live bool, err error)
	FailHealthChecks(ctx context.Context) error
	DrainListeners(ctx context.Context) error
	StopListeners(ctx context.Context) error
	DownstreamConnections(ctx context.Context) (int, error)
}

// binaryEnvoy runs the Envoy binary through pkg/envoy.
type binaryEnvoy struct{}

func (binaryEnvoy) Find(ctx context.Context, binary, stateDir string) (string, envoy.FoundVersion, error) {
	path, err := envoy.Locate(binary)
	if err != nil {
		return "", envoy.FoundVersion{}, err
	}
	found, err := envoy.VersionCache{Dir: stateDir}.Read(ctx, path)
	return path, found, err
}

func (binaryEnvoy) Start(spec envoy.Spec) (EnvoyProcess, error) {
	p, err := envoy.Start(spec)
	if err != nil {
		return nil, err // not a nil *envoy.Process in a non-nil interface
	}
	return p, nil
}

func (binaryEnvoy) Admin(addr envoy.AdminAddress) EnvoyAdmin { return envoy.NewAdmin(addr) }
