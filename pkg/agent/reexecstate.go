package agent

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// reloader is the agent's side of reloads: what it holds that must
// survive one, and what it was handed by the previous program.
type reloader struct {
	mu  sync.Mutex // held by a reload from its decision to the exec, and by Envoy's start
	hmu sync.Mutex // guards the rest
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

	// Kept for the next program as they are made.
	wd        *workDir
	sd        *stateDir
	listeners map[string]net.Listener
	relayLn   net.Listener
	obs       *observability
	feature   XDSFeature
	cache     *xds.Cache
	envoyPath string
	envoyVer  envoy.Version
	// envoyLaunch is envoyLaunch of the running Envoy's launch.
	envoyLaunch map[string]string
	// refetch asks the control plane for a bootstrap as a start would,
	// for an Envoy of version ev; set for an adopted Envoy.
	refetch func(ctx context.Context, ev envoy.Version) ([]byte, error)
}

// launched records how the running Envoy was launched.
func (r *reloader) launched(launch map[string]string) {
	r.hmu.Lock()
	r.envoyLaunch = launch
	r.hmu.Unlock()
}

func (r *reloader) launch() map[string]string {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.envoyLaunch
}

func (r *reloader) keepListener(name string, ln net.Listener) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.listeners == nil {
		r.listeners = map[string]net.Listener{}
	}
	r.listeners[name] = ln
}

func (r *reloader) keepObservability(o *observability) {
	r.hmu.Lock()
	r.obs = o
	r.hmu.Unlock()
}

func (r *reloader) keepFeature(f XDSFeature) {
	r.hmu.Lock()
	r.feature = f
	r.hmu.Unlock()
}

func (r *reloader) keepStateDir(sd *stateDir) {
	r.hmu.Lock()
	r.sd = sd
	r.hmu.Unlock()
}
