package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

// relayWatch is the agent's view of Envoy's configuration stream while the
// relay runs: what readiness and /status should say about it.
type relayWatch struct {
	a     *Agent
	relay *relay.Relay

	mu        sync.Mutex
	cached    relay.CacheState
	streamErr string // the control plane's last refusal, while not yet serving
	upstream  relay.Upstream
}

// openCache opens the last-known-good cache of this identity in the state
// dir the agent holds; nil when the relay or the state dir is off. A cache
// directory another user could change is the configuration's to fix (78);
// one that cannot be opened otherwise is a warning: the proxy runs without
// a cache.
func (a *Agent) openCache(sd *stateDir) (*lkgcache.Cache, error) {
	if !a.cfg.XDSRelay || sd == nil {
		return nil, nil
	}
	c, err := lkgcache.OpenIn(sd.dir, lkgcache.Options{
		Identity: CacheIdentity(a.cfg), MaxAge: a.cfg.CacheMaxAge, Log: a.log.Named("cache"),
	})
	if errors.Is(err, securedir.ErrUntrusted) {
		return nil, exitcode.AsConfig(err)
	}
	if err != nil {
		a.log.Warn("cannot keep a last-known-good configuration; running without one", zap.String("state-dir", a.cfg.StateDir), zap.Error(err))
		return nil, nil
	}
	a.opts.Metrics.WatchCacheCertificateExpiry(c.EarliestNotAfter)
	return c, nil
}

// CacheIdentity is whom a last-known-good cache is for: `run` keeps it and
// `check` reports on it under the same key.
func CacheIdentity(cfg *config.Config) lkgcache.Identity {
	return lkgcache.Identity{Mesh: cfg.Mesh, Name: cfg.Name, Role: string(cfg.Role), ControlPlane: cfg.CPAddress}
}

// usableCache is the cached configuration the agent may start Envoy on, nil
// when there is none it may serve (logged once per reason).
func (a *Agent) usableCache(c *lkgcache.Cache, wd *workDir, said *string) *lkgcache.Snapshot {
	if c == nil {
		return nil
	}
	snap, err := xds.Servable(c, wd.file(xds.SocketName))
	if err != nil {
		if err.Error() != *said {
			*said = err.Error()
			a.log.Info("no cached configuration to serve while the control plane is unreachable", zap.String("reason", *said))
		}
		return nil
	}
	return snap
}

// startXDS starts Envoy's configuration stream on the control plane's
// bootstrap doc or the cached configuration: through the relay (then
// a.xds is set), or directly.
func (a *Agent) startXDS(wd *workDir, doc []byte, cached *lkgcache.Snapshot, cache *lkgcache.Cache, prep *launchPrep) (*xds.Feature, error) {
	w := &relayWatch{a: a}
	f, err := xds.Start(xds.Options{
		Relay:        a.relayed(),
		Resume:       a.resumption(), // an adopted Envoy's relay (adopt.go)
		Bootstrap:    doc,
		Cached:       cached,
		SocketPath:   wd.file(xds.SocketName),
		Listener:     prep.relayListener, // opened while the bootstrap was fetched
		ControlPlane: xds.ControlPlane{URL: a.cfg.CPAddress, CACertFile: a.cfg.CACertFile},
		Token:        a.readToken,
		// kuma-cp shows the agent that runs now, also after a reload.
		AgentMetadata: bootstrap.SetAgentBuild,
		Cache:         cache,
		Backoff:       backoff.Backoff{Initial: a.cfg.RetryInitial, Max: a.cfg.RetryMax},
		Log:           a.log.Named("xds"),
		Events: relay.Events{
			StreamError:  w.streamError,
			CachedConfig: w.cachedConfig,
			Upstream:     w.upstreamChanged,
			// The relay logs and counts rejections; a zone listener Envoy
			// could not bind is the listener check's to explain and retry.
			Rejected: func(r relay.Rejection) { a.listeners.Rejected(r.TypeURL, r.Message, r.FromCache) },
		},
	})
	if err != nil {
		return nil, err
	}
	a.rl.keepFeature(f)
	if w.relay = f.Relay(); w.relay != nil {
		a.opts.Metrics.Register(w.relay.Metrics())
		a.xdsMu.Lock()
		a.xds = w
		a.xdsMu.Unlock()
	}
	return f, nil
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

func (x *relayWatch) streamError(e relay.StreamError) {
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

func (x *relayWatch) cachedConfig(c relay.CacheState) {
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

func (x *relayWatch) upstreamChanged(u relay.Upstream) {
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
func (x *relayWatch) servingDetail() string {
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
func (x *relayWatch) upstreamState() relay.Upstream {
	if x == nil {
		return relay.Upstream{}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.upstream
}

// lastRefusal is the control plane's last refusal, "" if none.
func (x *relayWatch) lastRefusal() string {
	if x == nil {
		return ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.streamErr
}

// setToken keeps the token last sent, and its expiry for the metrics
// (none for a token that is not a JWT or has no expiry).
func (a *Agent) setToken(tok string) {
	a.tokenMu.Lock()
	a.token = tok
	a.tokenMu.Unlock()
	var exp time.Time
	if c, err := token.Parse(tok); err == nil && c.ExpiresAt != nil {
		exp = c.ExpiresAt.Time
	}
	a.opts.Metrics.SetTokenExpiry(exp)
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
	a.tracker.Restate(state.Ready, a.generationWords(a.xds.servingDetail()))
}
