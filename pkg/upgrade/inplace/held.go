package inplace

import (
	"context"
	"net"
	"os"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// What a reload hands over is kept here as the agent makes it.

// KeepWorkDir keeps the work dir, open and locked.
func (u *Upgrades) KeepWorkDir(d upgrade.Dir, temporary bool) {
	u.hmu.Lock()
	u.held.workDir, u.held.temporary = &d, temporary
	u.hmu.Unlock()
}

// KeepStateDir keeps the state dir, open and locked.
func (u *Upgrades) KeepStateDir(d upgrade.Dir) {
	u.hmu.Lock()
	u.held.stateDir = &d
	u.hmu.Unlock()
}

// stateDirPath is the state dir's path; "" for none.
func (u *Upgrades) stateDirPath() string {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	if u.held.stateDir == nil {
		return ""
	}
	return u.held.stateDir.Path
}

func (u *Upgrades) keepListener(name string, ln net.Listener) {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	if u.held.listeners == nil {
		u.held.listeners = map[string]net.Listener{}
	}
	u.held.listeners[name] = ln
}

// KeepObservability keeps the access-log FIFO and the MeshMetric socket.
func (u *Upgrades) KeepObservability(accessLog func() *os.File, meshMetric func() (*os.File, error)) {
	u.hmu.Lock()
	u.held.accessLog, u.held.meshMetric = accessLog, meshMetric
	u.hmu.Unlock()
}

// KeepCache keeps the last-known-good cache (nil for none) and the
// version of the Envoy started on it.
func (u *Upgrades) KeepCache(c *xds.Cache, ev envoy.Version) {
	u.hmu.Lock()
	u.held.cache, u.held.envoyVer = c, ev
	u.hmu.Unlock()
}

// KeepRefetch keeps how to ask the control plane for a bootstrap as a
// start does, for an adopted Envoy's refresh.
func (u *Upgrades) KeepRefetch(refetch func(ctx context.Context, ev envoy.Version) ([]byte, error)) {
	u.hmu.Lock()
	u.held.refetch = refetch
	u.hmu.Unlock()
}

// launched records how the running Envoy was launched.
func (u *Upgrades) launched(launch map[string]string) {
	u.hmu.Lock()
	u.held.launch = launch
	u.hmu.Unlock()
}

func (u *Upgrades) launch() map[string]string {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	return u.held.launch
}

// holdings are what a reload hands over; the cache is written out first,
// so the new program serves Envoy the configuration it holds.
func (u *Upgrades) holdings(withEnvoy bool) upgrade.Holdings {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	r := &u.held
	gen, envoyGen, _ := u.record.Generations()
	h := upgrade.Holdings{Generation: gen, EnvoyGeneration: envoyGen, WorkDir: *r.workDir,
		TemporaryWorkDir: r.temporary, Listeners: r.listeners, Reloads: u.record.Reloads(), Handovers: u.results.Snapshot()}
	if r.stateDir != nil {
		sd := *r.stateDir
		h.StateDir = &sd
	}
	if !withEnvoy {
		return h
	}
	proc := u.h.Sup.Now().Proc.(*envoy.Process)
	place := u.Serving()
	e := &upgrade.HeldEnvoy{Output: proc.Output(), State: upgrade.EnvoyState{PID: proc.PID(), Path: r.envoyPath, Version: r.envoyVer,
		HandoverGeneration: place.Generation, Slot: place.Slot, Launch: r.launch}}
	if f := u.h.Feature(); f != nil && f.Relayed() {
		e.State.Relayed, e.State.Resume, e.Relay = true, f.Resumption(), r.relayLn
	}
	if r.accessLog != nil {
		e.AccessLog, e.MeshMetric = r.accessLog(), r.meshMetric
	}
	if r.cache != nil {
		e.Flush = r.cache.Flush
	}
	h.Envoy = e
	return h
}
