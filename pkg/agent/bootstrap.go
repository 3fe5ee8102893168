package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// fetcher makes the bootstrap requests of Envoy version ev, with the
// token given inline written to the work dir first.
func (a *Agent) fetcher(wd *workDir, client *bootstrap.Client, ev envoy.Version) (*bootstrap.Fetcher, error) {
	tokenPath := ""
	if a.cfg.DataplaneToken != "" {
		p, err := wd.write(tokenFile, []byte(strings.TrimSpace(a.cfg.DataplaneToken)))
		if err != nil {
			return nil, err
		}
		tokenPath = p
	}
	return client.Fetcher(a.cfg, wd.path, tokenPath, ev), nil
}

// bootstrap fetches Envoy's bootstrap, waiting while the mesh is missing
// or the control plane unreachable. While it is unreachable (not when it
// refuses) a usable last-known-good configuration is taken instead and
// returned as the snapshot. Nil results with a nil error mean the agent was
// stopped while waiting. The first attempt takes the client's connection
// dialled while the preflight ran, if it is usable.
func (a *Agent) bootstrap(ctx context.Context, wd *workDir, ev envoy.Version, cache *xds.Cache, client *bootstrap.Client) ([]byte, *xds.Cached, error) {
	f, err := a.fetcher(wd, client, ev)
	if err != nil {
		return nil, nil, err
	}
	// Not kept while Envoy runs; closing it (a TLS alert, a GOAWAY) need
	// not hold up Envoy's launch.
	defer func() { go f.Close() }()
	// Starting, not Waiting*: those mean an attempt failed.
	a.tracker.Set(state.Starting, fmt.Sprintf("contacting the control plane at %s", a.cfg.CPAddress))
	a.log.Info("requesting bootstrap", zap.String("cp", a.cfg.CPAddress), zap.String("mesh", a.cfg.Mesh),
		zap.String("name", a.cfg.Name), zap.String("role", string(a.cfg.Role)))

	// kuma-cp answers in milliseconds: with a cache to fall back on, one
	// that has not answered within cachedFallbackAfter counts as
	// unreachable, rather than after the 10 s an attempt may take.
	fallback := a.hasUsableCache(cache, wd)
	loop := bootstrap.Loop{
		Backoff: backoff.Backoff{Initial: a.cfg.RetryInitial, Max: a.cfg.RetryMax},
		Clock:   a.opts.Clock,
		Timeout: a.cfg.BootstrapTimeout,
		Attempt: func(ctx context.Context) ([]byte, error) {
			actx := ctx
			if fallback {
				var cancel context.CancelFunc
				actx, cancel = context.WithTimeout(ctx, cachedFallbackAfter)
				defer cancel()
			}
			doc, err := f.Attempt(actx)
			if err != nil && ctx.Err() == nil && actx.Err() != nil {
				err = &bootstrap.Error{Kind: bootstrap.Retryable,
					Msg: fmt.Sprintf("the control plane did not answer within %s (a last-known-good configuration is ready to serve)", cachedFallbackAfter)}
			}
			if err == nil {
				a.opts.Metrics.BootstrapAttempt("success")
			} else if ctx.Err() == nil {
				a.opts.Metrics.BootstrapAttempt(bootstrap.KindOf(err).String())
			}
			return doc, err
		},
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	var cached *xds.Cached
	var said string
	loop.OnWait = func(w bootstrap.Wait) {
		a.logWait(w)
		// Unreachable or busy, never a refusal (mesh missing, token, 4xx
		// of its own) nor a local failure (the token file): then the cached
		// configuration serves meanwhile. Exactly Retryable, not "not
		// Permanent".
		if w.Err.Kind == bootstrap.Retryable {
			if cached = usableCache(cache, wd, a.log, &said); cached != nil {
				stopLoop()
			}
		}
	}
	start := time.Now()
	doc, err := loop.Run(loopCtx)
	switch {
	case err == nil:
		a.token.Set(f.Token())
		a.log.Info("received bootstrap", zap.Duration("after", time.Since(start).Round(time.Millisecond)))
		a.tracker.Set(state.Bootstrapped, "bootstrap received")
		return doc, nil, nil
	case ctx.Err() != nil:
		a.log.Info("stopped while waiting for the control plane")
		return nil, nil, nil
	case cached != nil:
		a.token.Set(f.Token())
		a.log.Warn("the control plane is unreachable: starting Envoy on the last-known-good configuration; the agent keeps trying the control plane",
			zap.Time("configuration from", cached.WrittenAt))
		a.tracker.Set(state.Bootstrapped, "starting on the cached configuration")
		return nil, cached, nil
	default:
		return nil, nil, bootstrap.ExitError(err)
	}
}

// cachedFallbackAfter is how long a bootstrap attempt may take when a
// last-known-good configuration is ready: a well kuma-cp renders the
// bootstrap at once, so one silent this long is hung or unreachable.
const cachedFallbackAfter = 2500 * time.Millisecond

// hasUsableCache says, without logging, whether a cached configuration
// could be served if the control plane does not answer.
func (a *Agent) hasUsableCache(c *xds.Cache, wd *workDir) bool {
	_, err := c.Servable(wd.file(xds.SocketName))
	return err == nil
}

func (a *Agent) logWait(w bootstrap.Wait) {
	next := w.Next.Round(100 * time.Millisecond)
	if w.Next < time.Second {
		next = w.Next.Round(time.Millisecond)
	}
	if w.Err.Kind == bootstrap.MeshNotFound {
		a.opts.Metrics.WaitedForMesh(w.Next)
		detail := fmt.Sprintf("waiting for mesh %q (attempt %d, next in %s)", a.cfg.Mesh, w.Attempt, next)
		a.tracker.Set(state.WaitingForMesh, detail)
		a.log.Info("waiting for mesh: it does not exist on the control plane yet; create it and zoneproxy proceeds by itself",
			zap.String("mesh", a.cfg.Mesh), zap.Int("attempt", w.Attempt), zap.Duration("next", next))
		return
	}
	detail := fmt.Sprintf("waiting for the control plane (attempt %d, next in %s): %s", w.Attempt, next, w.Err.Msg)
	a.tracker.Set(state.WaitingForControlPlane, detail)
	a.log.Warn("bootstrap failed, retrying", zap.String("reason", w.Err.Error()),
		zap.Int("attempt", w.Attempt), zap.Duration("next", next))
}

// bootstrapOrResume is the bootstrap, or, for an adopted Envoy, what it
// runs on: the cached configuration the relay serves it at once (as after
// a restart, while kuma-cp holds the previous program's stream), else the
// bootstrap it was started with (xds.Options.Resume).
func (a *Agent) bootstrapOrResume(ctx context.Context, wd *workDir, ev envoy.Version, cache *xds.Cache, client *bootstrap.Client) ([]byte, *xds.Cached, error) {
	a.up.KeepCache(cache, ev)
	// One bootstrap request as a start makes it, for the adopted Envoy's
	// refresh and to follow the control plane's ADS protocol (follow.go).
	a.up.KeepRefetch(func(ctx context.Context, ev envoy.Version) ([]byte, error) {
		f, err := a.fetcher(wd, client, ev)
		if err != nil {
			return nil, err
		}
		defer func() { go f.Close() }()
		return f.Attempt(ctx)
	})
	taken := a.up.Taken()
	if !taken.AdoptsEnvoy() {
		taken.CloseUnclaimed()
		return a.bootstrap(ctx, wd, ev, cache, client)
	}
	// The token Envoy's output is redacted of; the relay reads it again
	// for each stream.
	if _, err := a.token.Read(); err != nil {
		a.log.Warn("cannot read the dataplane token; Envoy's output is not redacted of it until the relay reads it", zap.Error(err))
	}
	f, err := wd.dir.OpenFile(bootstrapFile, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the running Envoy's bootstrap: %w", err)
	}
	defer f.Close()
	doc, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the running Envoy's bootstrap: %w", err)
	}
	if taken.Envoy().Relayed && cache != nil {
		snap, err := cache.Servable(wd.file(xds.SocketName))
		if err == nil {
			return nil, snap, nil
		}
		a.log.Info("the relay resumes without serving the cached configuration first; Envoy keeps its configuration meanwhile", zap.String("reason", err.Error()))
	}
	return doc, nil, nil
}
