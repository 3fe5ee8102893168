package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/observability/accesslog"
	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// relayListen takes the handed-over relay socket, with Envoy's reconnect
// queued on it, or opens it.
func (a *Agent) relayListen(wd *workDir) (net.Listener, error) {
	var ln net.Listener
	var err error
	if f := a.rl.taken.EnvoyFile(upgrade.FileRelay); f != nil {
		ln, err = upgrade.UnixListener(f)
	} else {
		ln, err = xds.Listen(wd.at(xds.SocketName))
	}
	if err == nil {
		a.rl.hmu.Lock()
		a.rl.relayLn = ln
		a.rl.hmu.Unlock()
	}
	return ln, err
}

// startAccessLog takes the handed-over FIFO, with what Envoy wrote
// meanwhile in it, or makes it.
func (a *Agent) startAccessLog(o accesslog.Options) (*accesslog.Streamer, error) {
	if f := a.rl.taken.EnvoyFile(upgrade.FileAccessLog); f != nil {
		return accesslog.Adopt(o, f)
	}
	return accesslog.Start(o)
}

// serveMeshMetric takes the handed-over MeshMetric socket, or makes it.
func (a *Agent) serveMeshMetric(o meshmetric.Options) (*meshmetric.Server, error) {
	if f := a.rl.taken.EnvoyFile(upgrade.FileMeshMetric); f != nil {
		ln, err := upgrade.UnixListener(f)
		if err != nil {
			return nil, err
		}
		return meshmetric.ServeOn(o, ln)
	}
	return meshmetric.Serve(o)
}

// bootstrapOrResume is the bootstrap, or, for an adopted Envoy, what it
// runs on: the cached configuration the relay serves it at once (as after
// a restart, while kuma-cp holds the previous program's stream), else the
// bootstrap it was started with (xds.Options.Resume).
func (a *Agent) bootstrapOrResume(ctx context.Context, wd *workDir, ev envoy.Version, cache *xds.Cache, client *bootstrap.Client) ([]byte, *xds.Cached, error) {
	r := &a.rl
	r.hmu.Lock()
	r.cache, r.envoyVer = cache, ev
	r.hmu.Unlock()
	if !r.taken.AdoptsEnvoy() {
		r.taken.CloseUnclaimed()
		return a.bootstrap(ctx, wd, ev, cache, client)
	}
	// The token Envoy's output is redacted of; the relay reads it again
	// for each stream.
	if _, err := a.token.Read(); err != nil {
		a.log.Warn("cannot read the dataplane token; Envoy's output is not redacted of it until the relay reads it", zap.Error(err))
	}
	r.hmu.Lock()
	r.refetch = a.refetcher(wd, client)
	r.hmu.Unlock()
	f, err := wd.dir.OpenFile(bootstrapFile, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the running Envoy's bootstrap: %w", err)
	}
	defer f.Close()
	doc, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the running Envoy's bootstrap: %w", err)
	}
	if r.taken.Envoy().Relayed && cache != nil {
		snap, err := cache.Servable(wd.file(xds.SocketName))
		if err == nil {
			return nil, snap, nil
		}
		a.log.Info("the relay resumes without serving the cached configuration first; Envoy keeps its configuration meanwhile", zap.String("reason", err.Error()))
	}
	return doc, nil, nil
}

// resumption is xds.Options.Resume for an adopted, relayed Envoy.
func (a *Agent) resumption() *xds.Resumption {
	if e := a.rl.taken.Envoy(); e != nil {
		return e.Resume
	}
	return nil
}

// relayed says whether Envoy's xDS goes through the relay: as configured,
// or, for an adopted Envoy, as it did.
func (a *Agent) relayed() bool {
	if e := a.rl.taken.Envoy(); e != nil {
		return e.Relayed
	}
	return a.cfg.XDSRelay
}

// startEnvoy starts Envoy through sup, or adopts the handed-over one the
// first time; launch is how this program launches Envoy (envoyLaunch). It
// holds the reload lock: a reload never execs while Envoy is forked.
func (r *reloader) startEnvoy(sup *supervise.Supervisor, spec envoy.Spec, launch map[string]string) (EnvoyProcess, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hmu.Lock()
	r.envoyPath = spec.Path
	r.hmu.Unlock()
	if r.taken.AdoptsEnvoy() && !r.adopted {
		r.adopted = true
		defer r.taken.CloseUnclaimed()
		e := r.taken.Envoy()
		p, err := sup.Start(spec, &supervise.Adoption{PID: e.PID, Output: r.taken.File(upgrade.FileEnvoyOutput)})
		if err != nil {
			return nil, err
		}
		if e.Launch != nil {
			launch = e.Launch // else the previous program refused another
		}
		r.launched(launch)
		return p, nil
	}
	p, err := sup.Start(spec, nil)
	if err == nil {
		r.launched(launch)
		r.record.EnvoyStarted()
	}
	return p, err
}
