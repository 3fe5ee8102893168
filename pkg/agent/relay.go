package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/xds/bootstraprewrite"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

// relaySocket is where Envoy's rewritten bootstrap points its ADS.
const relaySocket = "zoneproxy-xds.sock"

// xds is the agent's side of Envoy's configuration: the relay between Envoy
// and the control plane and the last-known-good cache it feeds. It also
// remembers what readiness should say about it.
type xds struct {
	a     *Agent
	cache *lkgcache.Cache
	relay *relay.Relay

	mu        sync.Mutex
	cached    relay.CacheState
	streamErr string // the control plane's last refusal, while not yet serving
	upstream  relay.Upstream
}

// openCache opens the last-known-good cache of this identity; nil when the
// relay or the state dir is off. A cache directory another user could
// change is the configuration's to fix (78); one that cannot be opened
// otherwise is a warning: the proxy runs without a cache.
func (a *Agent) openCache() (*lkgcache.Cache, error) {
	if !a.cfg.XDSRelay || a.stateDirPath == "" {
		return nil, nil
	}
	c, err := lkgcache.Open(lkgcache.Options{
		Dir: a.stateDirPath, Identity: CacheIdentity(a.cfg), MaxAge: a.cfg.CacheMaxAge, Log: a.log.Named("cache"),
	})
	if errors.Is(err, securedir.ErrUntrusted) {
		return nil, exitcode.AsConfig(err)
	}
	if err != nil {
		a.log.Warn("cannot keep a last-known-good configuration; running without one", zap.String("state-dir", a.cfg.StateDir), zap.Error(err))
		return nil, nil
	}
	return c, nil
}

// CacheIdentity is whom a last-known-good cache is for: `run` keeps it and
// `check` reports on it under the same key.
func CacheIdentity(cfg *config.Config) lkgcache.Identity {
	return lkgcache.Identity{Mesh: cfg.Mesh, Name: cfg.Name, Role: string(cfg.Role), ControlPlane: cfg.CPAddress}
}

// usableCache is the cached configuration the agent may start Envoy on, nil
// when there is none it may serve (logged once per reason). The cached
// bootstrap holds work-dir paths (the relay and admin sockets, the FIFO),
// so a cache made in another work dir (a temporary one, say) is not used.
func (a *Agent) usableCache(c *lkgcache.Cache, wd *workDir, said *string) *lkgcache.Snapshot {
	if c == nil {
		return nil
	}
	snap, err := servableCache(c, wd)
	if err != nil {
		if err.Error() != *said {
			*said = err.Error()
			a.log.Info("no cached configuration to serve while the control plane is unreachable", zap.String("reason", *said))
		}
		return nil
	}
	return snap
}

// servableCache is c's snapshot if Envoy may be started on it in wd.
func servableCache(c *lkgcache.Cache, wd *workDir) (*lkgcache.Snapshot, error) {
	snap, err := c.Usable()
	if err == nil && !bytes.Contains(snap.Bootstrap, []byte(wd.file(relaySocket))) {
		err = fmt.Errorf("it was made in another work dir than %s (give the zone proxy a fixed --work-dir)", wd.path)
	}
	return snap, err
}

// startRelay rewrites the bootstrap so Envoy's ADS goes through the agent,
// and starts the relay. res is the rewritten bootstrap, made now or taken
// from the cache. The returned YAML is what Envoy gets: it holds no token.
func (a *Agent) startRelay(wd *workDir, doc []byte, fromCache *lkgcache.Snapshot, cache *lkgcache.Cache, prep *launchPrep) (*xds, []byte, error) {
	var res *bootstraprewrite.Result
	if fromCache != nil {
		up, err := a.configuredUpstream(fromCache.Upstream)
		if err != nil {
			prep.dropRelay()
			return nil, nil, err
		}
		res = &bootstraprewrite.Result{YAML: fromCache.Bootstrap, Upstream: up}
	} else {
		r, err := bootstraprewrite.Rewrite(doc, wd.file(relaySocket))
		if err != nil {
			prep.dropRelay()
			return nil, nil, err
		}
		res = r
	}
	if cache != nil { // stored with every snapshot, so that the next start can serve it
		cache.SetBootstrap(res)
	}
	x := &xds{a: a, cache: cache}
	// The socket was opened while the bootstrap was fetched (launchPrep).
	ln, listenErr := prep.relayListener()
	r, err := relay.New(relay.Options{
		SocketPath: wd.file(relaySocket),
		Listener:   ln,
		Upstream:   res.Upstream,
		Token:      a.readToken,
		Cache:      cache,
		Backoff:    backoff.Backoff{Initial: a.cfg.RetryInitial, Max: a.cfg.RetryMax},
		Log:        a.log.Named("xds"),
		// Started on the cache: the control plane did not answer.
		CacheFirst: fromCache != nil,
		Events: relay.Events{
			StreamError:  x.streamError,
			CachedConfig: x.cachedConfig,
			Upstream:     x.upstreamChanged,
			// The relay logs and counts rejections; a zone listener Envoy
			// could not bind is the listener check's to explain and retry.
			Rejected: a.envoyRejected,
		},
	})
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, nil, err
	}
	if listenErr == nil {
		listenErr = r.Start()
	}
	if listenErr != nil {
		return nil, nil, classify(fmt.Errorf("cannot serve Envoy's xDS on %s: %w", wd.file(relaySocket), listenErr))
	}
	x.relay = r
	a.opts.Metrics.Register(r.Metrics())
	return x, res.YAML, nil
}

// configuredUpstream is where the relay goes when Envoy starts on the
// cache: the control plane and the CA of the current configuration
// (--cp-address, --ca-cert-file, else the system's roots), never those
// the cache file names, so that a cache file, whoever wrote it, cannot send
// the token elsewhere. The rest (the metadata kuma-cp asked for, its
// message limit) is kept.
func (a *Agent) configuredUpstream(cached bootstraprewrite.Upstream) (bootstraprewrite.Upstream, error) {
	u, err := url.Parse(a.cfg.CPAddress)
	if err != nil || u.Hostname() == "" {
		return cached, exitcode.AsConfig(fmt.Errorf("--cp-address %q: not a URL with a host", a.cfg.CPAddress))
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	up := cached
	up.Address, up.ServerName, up.CAPEM = net.JoinHostPort(u.Hostname(), port), u.Hostname(), nil
	if a.cfg.CACertFile != "" {
		if up.CAPEM, err = os.ReadFile(a.cfg.CACertFile); err != nil {
			return cached, classify(fmt.Errorf("--ca-cert-file: %w", errtext.PathCause(err)))
		}
	}
	return up, nil
}

// readToken reads the token for each new upstream stream, so a rotated
// file applies at the next reconnect whatever the control plane's setting.
// The file is read as at start (token.ReadFile: a regular file of a
// token's size only, never blocking on a pipe nor reading a device); what
// goes wrong while it runs is a rotation under way, retried by the relay,
// which reports it as local: the control plane was not asked.
func (a *Agent) readToken() (string, error) {
	tok := strings.TrimSpace(a.cfg.DataplaneToken)
	if path := a.cfg.DataplaneTokenFile; path != "" {
		var err error
		if tok, err = token.ReadFile(path); err != nil {
			if errors.Is(err, token.ErrEmpty) {
				return "", fmt.Errorf("--dataplane-token-file %s is empty (is it being rotated?)", errtext.Value(path))
			}
			return "", fmt.Errorf("--dataplane-token-file: cannot read %s (is it being rotated?): %w", errtext.Value(path), errtext.PathCause(err))
		}
	}
	a.setToken(tok)
	return tok, nil
}

// close stops the relay (Envoy is gone by now), then flushes the cache.
func (x *xds) close() {
	if x == nil {
		return
	}
	x.relay.Close()
}

func (x *xds) streamError(e relay.StreamError) {
	if e.Held {
		// Without a cache to serve, Envoy waits for kuma-cp to let go.
		why := "no cached configuration to serve meanwhile: " + heldWords
		if x.upstreamState().State == relay.AnotherProxy {
			why = anotherProxyWords
		}
		if p := x.a.tracker.Current().Phase; p == state.EnvoyStarting || p == state.WaitingForControlPlane {
			x.a.tracker.Set(state.WaitingForControlPlane, why)
		}
		return
	}
	if e.Local || e.Unreachable {
		return // the relay logs and retries; the cache may be serving
	}
	// The relay has logged it, in the control plane's words.
	if e.Retrying {
		return
	}
	x.mu.Lock()
	x.streamErr = e.Message
	x.mu.Unlock()
	// Before Envoy serves, the control plane's own words are the reason;
	// while it serves the cached configuration, they say why it still does.
	if p := x.a.tracker.Current().Phase; p == state.EnvoyStarting || p == state.WaitingForControlPlane {
		x.a.tracker.Set(state.WaitingForControlPlane, "the control plane refused Envoy's configuration stream: "+e.Message)
	}
	x.a.refreshServing()
}

func (x *xds) cachedConfig(c relay.CacheState) {
	x.mu.Lock()
	x.cached = c
	if !c.InUse {
		x.streamErr = ""
	}
	x.mu.Unlock()
	switch {
	case c.InUse && c.Held: // expected after a restart: the relay said so
	case c.InUse:
		x.a.log.Warn("the control plane is unreachable: Envoy serves the last-known-good configuration",
			zap.Time("configuration from", c.WrittenAt), zap.Time("since", c.Since))
	default:
		x.a.log.Info("the control plane is back: Envoy's configuration comes from it again")
	}
	x.a.refreshServing()
}

func (x *xds) upstreamChanged(u relay.Upstream) {
	x.mu.Lock()
	x.upstream = u
	x.mu.Unlock()
	x.a.refreshServing()
}

// heldWords says what kuma-cp does while it holds the stream of this
// proxy's previous run.
const heldWords = "kuma-cp still holds the stream of this proxy's previous run (expected after a restart) and refuses new ones until its deregistration delay (10 s by default) is over; it keeps the previous Dataplane until then, deletes it, and registers it anew from this proxy's next stream, which the agent opens within a few hundred milliseconds"

// anotherProxyWords says why refusals that go on look like a duplicate.
const anotherProxyWords = "kuma-cp has refused this proxy's streams for longer than any deregistration delay, saying another stream of this name is active: another zone proxy runs with this --name (check the other hosts), or kuma-cp is stuck deregistering it"

// servingDetail is the READY detail: plain, or saying the configuration is
// the cached one and since when.
func (x *xds) servingDetail() string {
	if x == nil {
		return "Envoy ready"
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.cached.InUse {
		return "Envoy ready"
	}
	why := "the control plane is unreachable"
	switch {
	case x.upstream.State == relay.AnotherProxy:
		why = anotherProxyWords
	case x.cached.Held:
		why = heldWords
	case x.streamErr != "":
		why = "the control plane refuses the configuration stream: " + x.streamErr
	}
	return fmt.Sprintf("serving the cached configuration of %s since %s: %s",
		x.cached.WrittenAt.UTC().Format(time.RFC3339), x.cached.Since.UTC().Format(time.RFC3339), why)
}

// upstreamState is what kuma-cp is expected to make of the proxy now.
func (x *xds) upstreamState() relay.Upstream {
	if x == nil {
		return relay.Upstream{}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.upstream
}

// lastRefusal is the control plane's last refusal, "" if none.
func (x *xds) lastRefusal() string {
	if x == nil {
		return ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.streamErr
}

func (a *Agent) setToken(tok string) {
	a.tokenMu.Lock()
	a.token = tok
	a.tokenMu.Unlock()
}

func (a *Agent) currentToken() string {
	a.tokenMu.Lock()
	defer a.tokenMu.Unlock()
	return a.token
}

// closeCache flushes what is pending, bounded.
func closeCache(c *lkgcache.Cache) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cacheFlushTimeout)
	defer cancel()
	_ = c.Close(ctx)
}

// refreshServing restates READY when what it says changed (the cached
// configuration in use or not); any other phase is left alone.
func (a *Agent) refreshServing() {
	a.tracker.Restate(state.Ready, a.xds.servingDetail())
}
