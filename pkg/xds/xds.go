// Package xds is Envoy's configuration stream as one feature. Start points
// Envoy at the relay: it rewrites the control plane's bootstrap (or takes
// the last-known-good one from the cache), starts the relay on the work
// dir's socket with the cache behind it, and says where Envoy's admin API
// listens; Close stops the relay. With the relay off, or a bootstrap it
// cannot rewrite, Envoy talks to the control plane itself and the feature
// only reads the admin address. It is the agent's only door to xDS: the
// cache, the stream's state, the egress's withdrawal and the handover's
// switch go through it. It knows nothing of the agent's phases or
// readiness: what happens on the stream is reported through Hooks.
package xds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/xds/bootstraprewrite"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

// SocketName is the relay's socket in the work dir, where the rewritten
// bootstrap points Envoy's ADS.
const SocketName = "zoneproxy-xds.sock"

// Options configures Start.
type Options struct {
	// Relay is --xds-relay: Envoy's xDS goes through the agent. Off, Envoy
	// gets the control plane's bootstrap as it came.
	Relay bool
	// Bootstrap is the control plane's bootstrap document; not read when
	// Cached is set.
	Bootstrap []byte
	// Cached is the last-known-good configuration Envoy starts on because
	// the control plane did not answer; nil otherwise.
	Cached *Cached
	// SocketPath is the relay's socket, SocketName in the work dir.
	SocketPath string
	// Listener hands over SocketPath opened ahead (Listen, while the
	// bootstrap was fetched), or the error opening it. Start calls it once
	// when Relay is set, and closes what it gives when the relay does not
	// start. Nil: the relay opens the socket itself.
	Listener func() (net.Listener, error)
	// ControlPlane is where the relay goes when Envoy starts on Cached.
	ControlPlane ControlPlane
	// Token returns the dataplane token for each new upstream stream.
	Token   func() (string, error)
	Cache   *Cache // nil: no last-known-good configuration is kept
	Backoff backoff.Backoff
	Log     *zap.Logger
	// Notes is where what the stream means for the proxy is said (the
	// agent's log); Log if nil.
	Notes *zap.Logger
	Hooks Hooks
	// Register, if set, is given the relay's metrics once it runs.
	Register func(prometheus.Collector)
	// AgentMetadata is relay.Options.AgentMetadata.
	AgentMetadata func(md *structpb.Struct, deltaADS bool)
	// EgressListener is the name of Envoy's zone egress listener, "" for a
	// role without one: a start whose cache does not hold it registers the
	// egress NotReady until ZoneListenersPresent names it (heldback.go).
	EgressListener string
	// Resume, when set, is a relayed start's own Feature.Resumption(), handed
	// to the agent's next program: Bootstrap is the bootstrap Envoy runs
	// with already (pointing at the relay), not the control plane's.
	Resume *Resumption
}

// Feature is the started xDS feature.
type Feature struct {
	bootstrap []byte
	admin     envoy.AdminAddress
	resume    *Resumption
	relay     relayer // nil in direct mode
	watch     *watch
	notes     *zap.Logger
	// egressPropagation is how long WithdrawEgress waits for the sidecars.
	egressPropagation time.Duration
	held              *heldBack // the egress registered NotReady until Envoy has its listener
}

// relayer is what the feature drives of the relay (*relay.Relay).
type relayer interface {
	State() relay.State
	Withdraw(ctx context.Context, mark func(*corev3.Node) error) error
	Withdrawn() bool
	Rejoin()
	Reregister() bool
	Unanswered() []string
	BeginHandover(serving int)
	CompleteHandover(ctx context.Context) error
	EndHandover()
	Close()
}

// Start starts the feature. A control plane's bootstrap the relay cannot
// serve (no ADS, an unexpected shape, a socket that cannot be served) is
// logged and falls back to direct mode. An error means Envoy must not
// start: a bootstrap without a usable admin address, or a cached
// configuration the relay cannot serve (under the configured control
// plane, on the socket), since direct mode has no bootstrap to fall back on.
func Start(o Options) (*Feature, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Notes == nil {
		o.Notes = o.Log
	}
	switch {
	case !o.Relay:
		return direct(withAgentBuild(o.Bootstrap, o.AgentMetadata))
	case o.Cached != nil:
		return startOnCache(o)
	case o.Resume != nil:
		return resume(o)
	}
	res, err := bootstraprewrite.Rewrite(o.Bootstrap, o.SocketPath)
	if err != nil {
		o.dropListener()
		return fallBack(o, err)
	}
	admin, err := envoy.AdminFromSection(res.Admin)
	if err != nil {
		o.dropListener()
		return nil, unusable("the control plane's", err)
	}
	f, err := start(o, res.JSON, admin, res.Upstream)
	if err != nil {
		return fallBack(o, err)
	}
	return f, nil
}

// fallBack: Envoy can still talk to the control plane itself, without the
// cache, when the relay cannot serve it.
func fallBack(o Options, why error) (*Feature, error) {
	o.Log.Warn("cannot relay Envoy's xDS; Envoy talks to the control plane directly", zap.Error(why))
	return direct(withAgentBuild(o.Bootstrap, o.AgentMetadata))
}

// direct is Envoy talking to the control plane itself.
func direct(doc []byte) (*Feature, error) {
	admin, err := envoy.AdminFromBootstrap(doc)
	if err != nil {
		return nil, unusable("the control plane's", err)
	}
	return &Feature{bootstrap: doc, admin: admin}, nil
}

// startOnCache relays to the configured control plane, never to the one
// the cache file names (ControlPlane.dialFor).
func startOnCache(o Options) (*Feature, error) {
	snap := o.Cached.snap
	up, err := o.ControlPlane.dialFor(snap.Upstream)
	if err != nil {
		o.dropListener()
		return nil, err
	}
	admin, err := envoy.AdminFromBootstrap(snap.Bootstrap)
	if err != nil {
		o.dropListener()
		return nil, unusable("the cached", err)
	}
	return start(o, snap.Bootstrap, admin, up)
}

func unusable(whose string, err error) error {
	return exitcode.AsConfig(fmt.Errorf("%s bootstrap is unusable: %w", whose, err))
}

// start starts the relay for bootstrap, which points Envoy at it.
func start(o Options, bootstrap []byte, admin envoy.AdminAddress, up cpdial.Target) (*Feature, error) {
	cache := o.Cache.lkg()
	if cache != nil { // stored with every snapshot, so that the next start can serve it
		cache.SetBootstrap(bootstrap, up)
	}
	var held *heldBack
	if o.Resume == nil { // a reload's Envoy serves, registered already
		var cached *lkgcache.Snapshot
		if o.Cached != nil {
			cached = o.Cached.snap
		}
		held = holdBack(o.EgressListener, cached, cache)
	}
	if held != nil {
		o.Notes.Info("the zone egress is registered with its listener NotReady until Envoy has it: kuma-cp hands the zone's sidecars every Ready egress, also one it sent no egress listener (it sends none while the mesh has no MeshIdentity)",
			zap.String("listener", held.listener))
	}
	meta := o.AgentMetadata
	w := &watch{hooks: o.Hooks, log: o.Notes, held: held}
	var ln net.Listener
	var listenErr error
	if o.Listener != nil {
		ln, listenErr = o.Listener()
	}
	r, err := relay.New(relay.Options{
		SocketPath: o.SocketPath,
		Listener:   ln,
		Upstream:   up,
		Token:      o.Token,
		Cache:      cache,
		Backoff:    o.Backoff,
		Log:        o.Log,
		// Started on the cache: the control plane did not answer.
		CacheFirst:     o.Cached != nil,
		CacheFirstHeld: o.Cached != nil && o.Resume != nil, // a reload
		AgentMetadata: func(md *structpb.Struct, deltaADS bool) {
			if meta != nil {
				meta(md, deltaADS)
			}
			held.mark(md)
		},
		Events: w.events(),
	})
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, err
	}
	if listenErr == nil {
		listenErr = r.Start()
	}
	if listenErr != nil {
		return nil, exitcode.FromIO(fmt.Errorf("cannot serve Envoy's xDS on %s: %w", o.SocketPath, listenErr))
	}
	if o.Register != nil {
		o.Register(r.Metrics())
	}
	return &Feature{bootstrap: bootstrap, admin: admin, relay: r, resume: &Resumption{Upstream: up},
		watch: w, notes: o.Notes, egressPropagation: defaultEgressPropagation, held: held}, nil
}

// dropListener closes the socket opened ahead: the relay does not start.
func (o Options) dropListener() {
	if o.Listener == nil {
		return
	}
	if ln, _ := o.Listener(); ln != nil {
		_ = ln.Close()
	}
}

// Listen opens the relay's socket at path ahead of Start
// (Options.Listener).
func Listen(path string) (net.Listener, error) { return relay.Listen(path) }

// Bootstrap is what Envoy is started with: when relayed, the rewritten
// bootstrap, JSON (which Envoy reads as YAML) with no token in it;
// otherwise the control plane's document as it came.
func (f *Feature) Bootstrap() []byte { return f.bootstrap }

// Admin is where Envoy's admin API listens, read from Bootstrap once.
func (f *Feature) Admin() envoy.AdminAddress { return f.admin }

// Resumption is what another relay needs to serve the running Envoy: nil
// in direct mode.
func (f *Feature) Resumption() *Resumption {
	if f == nil {
		return nil
	}
	return f.resume
}

// Relayed says whether Envoy's xDS goes through the relay.
func (f *Feature) Relayed() bool { return f != nil && f.relay != nil }

// Stream is what the relay's events said of the stream; zero in direct
// mode.
func (f *Feature) Stream() StreamState {
	if f == nil || f.watch == nil {
		return StreamState{}
	}
	return f.watch.state()
}

// Live is the relay's state now, rather than as its events said; zero in
// direct mode.
func (f *Feature) Live() (Upstream, CacheState) {
	if !f.Relayed() {
		return Upstream{}, CacheState{}
	}
	st := f.relay.State()
	return st.Upstream, st.Cache
}

// Close stops the relay, once Envoy is gone; it may be called again. The
// cache is not closed: its owner flushes it after Close.
func (f *Feature) Close() {
	if f != nil && f.relay != nil {
		f.relay.Close()
	}
}

var errNotRelayed = errors.New("Envoy's xDS does not go through the relay (" + config.KeyXDSRelay.Flag() + ")")
