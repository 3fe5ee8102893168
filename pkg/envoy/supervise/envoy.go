// Package supervise runs one Envoy at a time for the agent: it starts (or
// adopts) an Envoy from a spec, waits for it to turn LIVE, drains it
// within a window, stops it and restarts it in place. What each of those
// means to the zone proxy (the phase, the exit code) is the agent's.
package supervise

import (
	"context"
	"os"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/listenwatch"
)

// StopGrace is how long Envoy gets between SIGTERM and SIGKILL.
const StopGrace = 5 * time.Second

// Envoy finds, starts and talks to Envoy. Binary is the real one; tests
// give a fake one.
type Envoy interface {
	// Find resolves binary (a path, or a name on PATH) and reads its
	// version, kept in stateDir's version cache ("" for none).
	Find(ctx context.Context, binary, stateDir string) (path string, found envoy.FoundVersion, err error)
	// Start launches Envoy as spec says.
	Start(spec envoy.Spec) (Process, error)
	// Admin is a client of the admin API Envoy's bootstrap puts at addr.
	Admin(addr envoy.AdminAddress) Admin
}

// Adopter is an Envoy that can take over a running one.
type Adopter interface {
	Adopt(pid int, output *os.File, spec envoy.Spec) (Process, error)
}

// Process is the running Envoy as it is supervised.
type Process interface {
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

// Admin is what the agent asks of Envoy's admin API.
type Admin interface {
	DrainAdmin
	listenwatch.Lister
	SetLogLevel(ctx context.Context, component, level string) error
	// Build is the build Envoy reports, as `envoy --version` prints it.
	Build(ctx context.Context) (string, error)
	PrometheusStats(ctx context.Context) (string, error)
	Close()
}

// DrainAdmin is the part of the admin API that the wait for LIVE and the
// drains use.
type DrainAdmin interface {
	Ready(ctx context.Context) (word string, live bool, err error)
	FailHealthChecks(ctx context.Context) error
	DrainListeners(ctx context.Context) error
	StopListeners(ctx context.Context) error
	DownstreamConnections(ctx context.Context) (int, error)
}

// ServingAdmin is the admin API of the serving Envoy as the serve loop
// uses it: drains and the zone listeners' watch.
type ServingAdmin interface {
	DrainAdmin
	listenwatch.Lister
}

// Binary runs the Envoy binary through pkg/envoy.
type Binary struct{}

func (Binary) Find(ctx context.Context, binary, stateDir string) (string, envoy.FoundVersion, error) {
	path, err := envoy.Locate(binary)
	if err != nil {
		return "", envoy.FoundVersion{}, err
	}
	found, err := envoy.VersionCache{Dir: stateDir}.Read(ctx, path)
	return path, found, err
}

func (Binary) Start(spec envoy.Spec) (Process, error) {
	p, err := envoy.Start(spec)
	if err != nil {
		return nil, err // not a nil *envoy.Process in a non-nil interface
	}
	return p, nil
}

func (Binary) Adopt(pid int, output *os.File, spec envoy.Spec) (Process, error) {
	p, err := envoy.Adopt(pid, output, spec.Output)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (Binary) Admin(addr envoy.AdminAddress) Admin { return envoy.NewAdmin(addr) }
