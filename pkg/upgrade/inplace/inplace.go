// Package inplace is the running agent's side of its upgrades in place: a
// reload (a new program in the same process, Envoy adopted) and an Envoy
// handover (a new Envoy beside the serving one). pkg/upgrade decides; this
// package holds what a reload hands over and does the steps, for the agent,
// which says when (pkg/agent).
package inplace

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/metrics"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// Host is what the upgrades need of the agent.
type Host struct {
	Config  *config.Config
	Log     *zap.Logger
	Tracker *state.Tracker
	Metrics *metrics.Metrics
	// Sup starts, drains and stops the agent's Envoys.
	Sup *supervise.Supervisor
	// Handover is what the previous program handed over (a
	// *reexec.Handover); nil on a fresh start.
	Handover upgrade.Handover
	// Skip closes on a second stop signal: an old Envoy's drain ends.
	Skip <-chan struct{}
	// Serving: a live Envoy is supervised. Drained: a maintenance drain
	// is asked.
	Serving, Drained func() bool
	// FindEnvoy is --envoy-binary as it is now, and its version.
	FindEnvoy func(ctx context.Context) (string, envoy.Version, error)
	// Feature is Envoy's configuration stream, relayed or direct; nil
	// before it starts.
	Feature func() Feature
	// Serves points the agent's probes and metrics at a new serving Envoy.
	Serves func(admin supervise.Admin)
	// Restate restates READY once a handover is done.
	Restate func()
}

// Feature is Envoy's configuration stream as a reload and a handover use
// it (xds.Feature).
type Feature interface {
	Relayed() bool
	Resumption() *xds.Resumption // nil in direct mode
	FromControlPlane() (xds.UpstreamState, bool)
	BeginHandover(serving int)
	CompleteHandover(ctx context.Context) error
	EndHandover()
}

// Kit is what a handover needs of the serving Envoy's launch.
type Kit struct {
	Launch *upgrade.Launch
	Relay  Feature // nil in direct mode
	// Socket is the relay's socket as Envoy's bootstrap names it.
	Socket string
	// Stats is where /stats readers find the serving Envoy's admin API.
	Stats *atomic.Pointer[envoy.Admin]
}

// Upgrades are the agent's reloads and Envoy handovers.
type Upgrades struct {
	h   Host
	mu  sync.Mutex // held by a reload from its decision to the exec, and by Envoy's start
	hmu sync.Mutex // guards the held state below
	// stopAsked: a stop signal came; a reload not yet exec'd gives way.
	stopAsked atomic.Bool
	// exe and args are how the agent was started, exe resolved then:
	// after a package upgrade /proc/self/exe names the deleted old file,
	// the path the new one.
	exe  string
	args []string

	record upgrade.Record

	// taken is what the previous program handed over; nil on a fresh start.
	taken   *upgrade.Taken
	adopted bool // the handed-over Envoy is adopted

	held held

	// The handovers.
	kit      atomic.Pointer[Kit]
	requests upgrade.Requests
	// place is the serving Envoy's; nil before the first starts.
	place    atomic.Pointer[upgrade.Place]
	retiring upgrade.Retirements
	results  upgrade.Counts // zoneproxy_envoy_handovers_total

	follow follow // follow.go: the control plane's ADS protocol
}

// held is what a reload hands over, kept as it is made.
type held struct {
	workDir    *upgrade.Dir
	temporary  bool
	stateDir   *upgrade.Dir
	listeners  map[string]net.Listener
	relayLn    net.Listener
	accessLog  func() *os.File
	meshMetric func() (*os.File, error)
	cache      *xds.Cache
	envoyPath  string
	envoyVer   envoy.Version
	// launch is Launch of the running Envoy's launch.
	launch map[string]string
	// refetch asks the control plane for a bootstrap as a start would,
	// for an Envoy of version ev; set for an adopted Envoy.
	refetch func(ctx context.Context, ev envoy.Version) ([]byte, error)
}

// New returns the upgrades of the agent h describes; it registers their
// metrics.
func New(h Host) *Upgrades {
	if h.Log == nil {
		h.Log = zap.NewNop()
	}
	if h.Feature == nil {
		h.Feature = func() Feature { return nil }
	}
	u := &Upgrades{h: h}
	u.registerHandovers()
	u.registerProtocolChanges()
	return u
}

// Record is the agent's and Envoy's generations and the last reload.
func (u *Upgrades) Record() *upgrade.Record { return &u.record }

// Taken is what the previous program handed over; nil on a fresh start.
func (u *Upgrades) Taken() *upgrade.Taken {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	return u.taken
}

// StopAsked: a stop signal came; a reload under way gives way.
func (u *Upgrades) StopAsked() { u.stopAsked.Store(true) }
