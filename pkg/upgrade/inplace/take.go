package inplace

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/observability/accesslog"
	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// The new program's side of a reload: the agent's story, with what the
// previous program handed over taken at each step instead of made anew.
// With an Envoy handed over, nothing that Envoy uses is touched: the work
// dir is not cleaned, no leftover Envoy is looked for, Envoy's ports are
// not checked, no bootstrap is fetched, and Envoy is adopted, not
// started. Without one (the previous program waited for the mesh or the
// control plane), the new program starts over on the handed-over dirs and
// listeners.

// Take reads what the previous program handed over (Host.Handover), first
// thing in the agent's run.
func (u *Upgrades) Take() error {
	exe, args := startedAs()
	u.hmu.Lock()
	u.exe, u.args = exe, args
	u.hmu.Unlock()
	u.record.Started()
	u.record.Register(u.h.Metrics.Register)
	if u.h.Handover == nil {
		return nil
	}
	taken, err := upgrade.Take(u.h.Handover)
	if err != nil {
		return err
	}
	st := &taken.State
	u.hmu.Lock()
	u.taken = taken
	u.hmu.Unlock()
	u.record.Reloaded(st, time.Now())
	u.results.Carry(st.Handovers)
	generation, envoyGeneration, _ := u.record.Generations()
	if st.Envoy != nil {
		// /ready answers READY from the first request the new program
		// serves: Envoy never stopped serving.
		u.h.Tracker.Set(state.Ready, fmt.Sprintf("reloaded: agent generation %d took over the running Envoy (pid %d)", generation, st.Envoy.PID))
		u.h.Log.Info("reloaded: taking over the running Envoy", zap.Int("generation", generation),
			zap.Int("envoy-generation", envoyGeneration), zap.Int("envoy-pid", st.Envoy.PID))
	} else {
		u.h.Log.Info("reloaded: no Envoy ran yet; starting over", zap.Int("generation", generation))
	}
	return nil
}

// startedAs is how this program was started, its path resolved now: the
// path a reload runs, the new binary after a package upgrade.
func startedAs() (string, []string) {
	exe := os.Args[0]
	if filepath.Base(exe) == exe {
		if p, err := exec.LookPath(exe); err == nil {
			exe = p
		}
	}
	if abs, err := filepath.Abs(exe); err == nil {
		exe = abs
	}
	return exe, append([]string(nil), os.Args...)
}

// Moved says whether the directory the configuration names (want) is
// another than the handed-over one at path.
func Moved(want, path string) bool { return absPath(want) != path }

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return filepath.Clean(abs)
	}
	return p
}

// Listen takes the handed-over listener of p, if it listens on p's
// address still, or listens anew: a changed --readiness-port moves.
func (u *Upgrades) Listen(p preflight.Port) (net.Listener, error) {
	ln := u.Taken().Listener(p.Flag, p.Addr)
	var err error
	if ln == nil {
		ln, err = preflight.Listen(p.Addr)
	}
	if err == nil {
		u.keepListener(p.Flag, ln)
	}
	return ln, err
}

// RelayListen takes the handed-over relay socket, with Envoy's reconnect
// queued on it, or opens it at path.
func (u *Upgrades) RelayListen(path string) (net.Listener, error) {
	var ln net.Listener
	var err error
	if f := u.Taken().EnvoyFile(upgrade.FileRelay); f != nil {
		ln, err = upgrade.UnixListener(f)
	} else {
		ln, err = xds.Listen(path)
	}
	if err == nil {
		u.hmu.Lock()
		u.held.relayLn = ln
		u.hmu.Unlock()
	}
	return ln, err
}

// AccessLog takes the handed-over FIFO, with what Envoy wrote meanwhile
// in it, or makes it.
func (u *Upgrades) AccessLog(o accesslog.Options) (*accesslog.Streamer, error) {
	if f := u.Taken().EnvoyFile(upgrade.FileAccessLog); f != nil {
		return accesslog.Adopt(o, f)
	}
	return accesslog.Start(o)
}

// MeshMetric takes the handed-over MeshMetric socket, or makes it.
func (u *Upgrades) MeshMetric(o meshmetric.Options) (*meshmetric.Server, error) {
	if f := u.Taken().EnvoyFile(upgrade.FileMeshMetric); f != nil {
		ln, err := upgrade.UnixListener(f)
		if err != nil {
			return nil, err
		}
		return meshmetric.ServeOn(o, ln)
	}
	return meshmetric.Serve(o)
}

// Resumption is xds.Options.Resume for an adopted, relayed Envoy.
func (u *Upgrades) Resumption() *xds.Resumption {
	if e := u.Taken().Envoy(); e != nil {
		return e.Resume
	}
	return nil
}

// Relayed says whether Envoy's xDS goes through the relay: as configured,
// or, for an adopted Envoy, as it did.
func (u *Upgrades) Relayed() bool {
	if e := u.Taken().Envoy(); e != nil {
		return e.Relayed
	}
	return u.h.Config.XDSRelay
}

// StartEnvoy starts Envoy through the supervisor, or adopts the
// handed-over one the first time. It holds the reload lock: a reload
// never execs while Envoy is forked.
func (u *Upgrades) StartEnvoy(spec envoy.Spec) (supervise.Process, error) {
	launch := launchOf(u.h.Config)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.hmu.Lock()
	u.held.envoyPath = spec.Path
	taken := u.taken
	u.hmu.Unlock()
	if taken.AdoptsEnvoy() && !u.adopted {
		u.adopted = true
		defer taken.CloseUnclaimed()
		e := taken.Envoy()
		p, err := u.h.Sup.Start(spec, &supervise.Adoption{PID: e.PID, Output: taken.File(upgrade.FileEnvoyOutput)})
		if err != nil {
			return nil, err
		}
		if e.Launch != nil {
			launch = e.Launch // else the previous program refused another
		}
		u.launched(launch)
		return p, nil
	}
	p, err := u.h.Sup.Start(spec, nil)
	if err == nil {
		u.launched(launch)
		u.record.EnvoyStarted()
	}
	return p, err
}
