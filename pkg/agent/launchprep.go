package agent

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// launchPrep is what Envoy's launch needs that the bootstrap's content does
// not decide: the relay's socket, the access-log FIFO, the MeshMetric
// socket, and the process start's one-off set-up (envoy.WarmUp). It is made
// while the bootstrap request is in flight; only Envoy connects to these,
// and it does not run yet. Their errors are returned where the launch used
// to meet them, so a failure reads as it always has. What the launch does
// not take, release closes and removes.
type launchPrep struct {
	done     chan struct{}
	relayLn  net.Listener // nil in direct mode, or when relayErr
	relayErr error
	obs      *observability
	obsErr   error
	admin    atomic.Pointer[envoy.Admin] // set before Envoy starts
}

// prepareLaunch starts preparing in the background.
func (a *Agent) prepareLaunch(wd *workDir) *launchPrep {
	p := &launchPrep{done: make(chan struct{})}
	relayed := a.up.Relayed()
	go func() {
		defer close(p.done)
		if relayed {
			p.relayLn, p.relayErr = a.up.RelayListen(wd.at(xds.SocketName))
		}
		p.obs, p.obsErr = a.startObservability(wd.path, p.stats)
		if o := p.obs; o != nil {
			a.up.KeepObservability(o.accessLog.FIFO, o.hijacker.File)
		}
		envoy.WarmUp()
	}()
	return p
}

var errNoEnvoyYet = errors.New("Envoy is not running yet")

// stats reads Envoy's /stats once Envoy's admin address is known.
func (p *launchPrep) stats(ctx context.Context, query string) (string, error) {
	adm := p.admin.Load()
	if adm == nil {
		return "", errNoEnvoyYet
	}
	return adm.Stats(ctx, query)
}

// relayListener hands the relay's socket over, or the error opening it.
func (p *launchPrep) relayListener() (net.Listener, error) {
	<-p.done
	ln, err := p.relayLn, p.relayErr
	p.relayLn = nil
	return ln, err
}

// dropRelay closes the relay's socket: Envoy talks to the control plane
// directly.
func (p *launchPrep) dropRelay() {
	if ln, _ := p.relayListener(); ln != nil {
		_ = ln.Close()
	}
}

// observability hands the observability over, or the error starting it.
func (p *launchPrep) observability() (*observability, error) {
	<-p.done
	o, err := p.obs, p.obsErr
	p.obs = nil
	return o, err
}

// release closes and removes whatever was not handed over.
func (p *launchPrep) release() {
	p.dropRelay()
	if o, _ := p.observability(); o != nil {
		o.close()
	}
}
