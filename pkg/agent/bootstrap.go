package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/backoff"
	"github.com/zoneproxy/zoneproxy/pkg/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
	"github.com/zoneproxy/zoneproxy/pkg/state"
	"github.com/zoneproxy/zoneproxy/pkg/token"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// systemCAPaths are checked in order, as kuma-dp does; the control plane
// hands the first existing one to Envoy for external TLS.
var systemCAPaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// Fetcher makes /bootstrap attempts for one configuration. `run` retries
// it; `check` and `bootstrap` make a single attempt.
type Fetcher struct {
	client    *bootstrap.Client
	req       bootstrap.Request
	tokenPath string
	inline    string
	sent      string // the token the last request carried
}

// NewFetcher prepares the request. tokenPath overrides the configured token
// file (run writes an inline token into its work dir so the control plane
// gets a path too).
func NewFetcher(cfg *config.Config, workDir, tokenPath string, ev envoy.Version) (*Fetcher, error) {
	var caPEM []byte
	if cfg.CACertFile != "" {
		b, err := os.ReadFile(cfg.CACertFile)
		if err != nil {
			return nil, exitcode.AsConfig(fmt.Errorf("--ca-cert-file: cannot read %s: %v", cfg.CACertFile, errtext.PathCause(err)))
		}
		caPEM = b
	}
	client, err := bootstrap.NewClient(cfg.CPAddress, caPEM)
	if err != nil {
		return nil, exitcode.AsConfig(fmt.Errorf("--ca-cert-file %s: %w", cfg.CACertFile, err))
	}
	if tokenPath == "" {
		tokenPath = cfg.DataplaneTokenFile
	}
	return &Fetcher{
		client: client, req: *newRequest(cfg, workDir, ev, caPEM),
		tokenPath: tokenPath, inline: strings.TrimSpace(cfg.DataplaneToken),
	}, nil
}

// Attempt sends one request.
func (f *Fetcher) Attempt(ctx context.Context) ([]byte, error) {
	r := f.req
	r.DataplaneToken = f.inline
	if f.tokenPath != "" {
		tok, err := f.readToken()
		if err != nil {
			return nil, err
		}
		r.DataplaneToken = tok
		r.DataplaneTokenPath = f.tokenPath
	}
	f.sent = r.DataplaneToken
	return f.client.Fetch(ctx, &r)
}

// readToken reads the token file each time, so a rotated token is picked
// up. Validation found it usable at start-up: missing or empty now, it is
// being replaced (not atomically), so the attempt is retried.
func (f *Fetcher) readToken() (string, error) {
	tok, err := token.ReadFile(f.tokenPath)
	switch {
	case errors.Is(err, token.ErrEmpty):
		return "", &bootstrap.Error{Kind: bootstrap.Retryable,
			Msg: fmt.Sprintf("--dataplane-token-file: %s is empty (is it being rotated?); retrying once it holds the token", f.tokenPath)}
	case err != nil:
		return "", &bootstrap.Error{Kind: bootstrap.Retryable, Err: errtext.PathCause(err),
			Msg: fmt.Sprintf("--dataplane-token-file: cannot read %s (is it being rotated?); retrying", f.tokenPath)}
	}
	return tok, nil
}

// Token is the credential the last request carried (and so the one in
// Envoy's bootstrap), for redaction.
func (f *Fetcher) Token() string { return f.sent }

// Close drops idle connections.
func (f *Fetcher) Close() { f.client.CloseIdle() }

// bootstrap fetches Envoy's bootstrap, waiting while the mesh is missing
// or the control plane unreachable. While it is unreachable (not when it
// refuses) a usable last-known-good configuration is taken instead and
// returned as the snapshot. Nil results with a nil error mean the agent was
// stopped while waiting.
func (a *Agent) bootstrap(ctx context.Context, wd *workDir, ev envoy.Version, cache *lkgcache.Cache) ([]byte, *lkgcache.Snapshot, error) {
	tokenPath := ""
	if a.cfg.DataplaneToken != "" {
		p, err := wd.write(tokenFile, []byte(strings.TrimSpace(a.cfg.DataplaneToken)))
		if err != nil {
			return nil, nil, err
		}
		tokenPath = p
	}
	f, err := NewFetcher(a.cfg, wd.path, tokenPath, ev)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	// Starting, not Waiting*: those mean an attempt failed.
	a.tracker.Set(state.Starting, fmt.Sprintf("contacting the control plane at %s", a.cfg.CPAddress))
	a.log.Info("requesting bootstrap", zap.String("cp", a.cfg.CPAddress), zap.String("mesh", a.cfg.Mesh),
		zap.String("name", a.cfg.Name), zap.String("role", string(a.cfg.Role)))

	loop := bootstrap.Loop{
		Backoff: backoff.Backoff{Initial: a.cfg.RetryInitial, Max: a.cfg.RetryMax},
		Clock:   a.opts.Clock,
		Timeout: a.cfg.BootstrapTimeout,
		Attempt: func(ctx context.Context) ([]byte, error) {
			doc, err := f.Attempt(ctx)
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
	var cached *lkgcache.Snapshot
	var said string
	loop.OnWait = func(w bootstrap.Wait) {
		a.logWait(w)
		// Unreachable or busy, never a refusal (mesh missing, token, 4xx
		// of its own): then the cached configuration serves meanwhile.
		if w.Err.Kind == bootstrap.Retryable {
			if cached = a.usableCache(cache, wd, &said); cached != nil {
				stopLoop()
			}
		}
	}
	start := time.Now()
	doc, err := loop.Run(loopCtx)
	switch {
	case err == nil:
		a.setToken(f.Token())
		a.log.Info("received bootstrap", zap.Duration("after", time.Since(start).Round(time.Millisecond)))
		a.tracker.Set(state.Bootstrapped, "bootstrap received")
		return doc, nil, nil
	case ctx.Err() != nil:
		a.log.Info("stopped while waiting for the control plane")
		return nil, nil, nil
	case cached != nil:
		a.setToken(f.Token())
		a.log.Warn("the control plane is unreachable: starting Envoy on the last-known-good configuration; the agent keeps trying the control plane",
			zap.Time("configuration from", cached.WrittenAt))
		a.tracker.Set(state.Bootstrapped, "starting on the cached configuration")
		return nil, cached, nil
	default:
		return nil, nil, bootstrap.ExitError(err)
	}
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

func newRequest(cfg *config.Config, workDir string, ev envoy.Version, caPEM []byte) *bootstrap.Request {
	dp := cfg.Dataplane()
	return &bootstrap.Request{
		Mesh:              dp.Mesh,
		Name:              dp.Name,
		ProxyType:         "dataplane",
		DataplaneResource: dp.JSON(),
		Version: bootstrap.Version{
			// The Kuma release this build speaks for, not zoneproxy's own
			// version, which kuma-cp would judge incompatible with itself.
			KumaDp: bootstrap.KumaDpVersion{
				Version: version.Kuma, GitTag: "zoneproxy-" + version.Version,
				GitCommit: version.Commit, BuildDate: version.BuildDate,
			},
			Envoy: bootstrap.EnvoyVersion{Version: ev.Version, Build: ev.Build, KumaDpCompatible: version.EnvoyCompatible(ev.Version)},
		},
		CACert: string(caPEM),
		// Shown in the DataplaneInsight's version dependencies.
		DynamicMetadata: map[string]string{"version.dependencies.zoneproxy": version.Version},
		ReadinessPort:   uint32(cfg.ReadinessPort),
		OperatingSystem: runtime.GOOS,
		Features:        []string{bootstrap.FeatureTCPAccessLogViaNamedPipe, bootstrap.FeatureReusePort},
		Workdir:         workDir,
		SystemCAPath:    firstExisting(systemCAPaths),
		IPv6Enabled:     hostHasIPv6(),
	}
}

func firstExisting(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func hostHasIPv6() bool {
	b, err := os.ReadFile("/proc/net/if_inet6")
	return err == nil && len(b) > 0
}
