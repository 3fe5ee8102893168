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

	"github.com/zoneproxy/zoneproxy/pkg/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/state"
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

// bootstrap fetches Envoy's bootstrap, waiting while the mesh is missing
// or the control plane unreachable. A nil result with nil error means the
// agent was stopped while waiting.
func (a *Agent) bootstrap(ctx context.Context, wd *workDir, ev envoy.Version) ([]byte, error) {
	var caPEM []byte
	if a.cfg.CACertFile != "" {
		b, err := os.ReadFile(a.cfg.CACertFile)
		if err != nil {
			return nil, exitcode.AsConfig(fmt.Errorf("--ca-cert-file: cannot read %s: %v", a.cfg.CACertFile, unwrap(err)))
		}
		caPEM = b
	}
	client, err := bootstrap.NewClient(a.cfg.CPAddress, caPEM)
	if err != nil {
		return nil, exitcode.AsConfig(fmt.Errorf("--ca-cert-file %s: %w", a.cfg.CACertFile, err))
	}
	defer client.CloseIdle()

	tokenPath := a.cfg.DataplaneTokenFile
	if a.cfg.DataplaneToken != "" {
		// The control plane wants a path too (reloadable tokens read it).
		p, err := wd.write(tokenFile, []byte(strings.TrimSpace(a.cfg.DataplaneToken)))
		if err != nil {
			return nil, exitcode.AsConfig(err)
		}
		tokenPath = p
	}
	req := a.request(wd, ev, caPEM)
	dp := a.cfg.Dataplane()
	a.tracker.Set(state.WaitingForMesh, fmt.Sprintf("contacting the control plane at %s", a.cfg.CPAddress))
	a.log.Info("requesting bootstrap", zap.String("cp", a.cfg.CPAddress), zap.String("mesh", dp.Mesh),
		zap.String("name", dp.Name), zap.String("role", string(a.cfg.Role)))

	loop := bootstrap.Loop{
		Backoff: bootstrap.Backoff{Initial: a.cfg.RetryInitial, Max: a.cfg.RetryMax},
		Clock:   a.opts.Clock,
		Timeout: a.cfg.BootstrapTimeout,
		Attempt: func(ctx context.Context) ([]byte, error) {
			// Re-read each time: a rotated token file is picked up.
			r := *req
			if tokenPath != "" {
				tok, err := os.ReadFile(tokenPath)
				if err != nil {
					return nil, &bootstrap.Error{Kind: bootstrap.Permanent, Msg: fmt.Sprintf("--dataplane-token-file: cannot read %s", tokenPath), Err: unwrap(err)}
				}
				r.DataplaneToken = strings.TrimSpace(string(tok))
				r.DataplaneTokenPath = tokenPath
			}
			return client.Fetch(ctx, &r)
		},
		OnWait: a.logWait,
	}
	start := time.Now()
	doc, err := loop.Run(ctx)
	switch {
	case err == nil:
		a.log.Info("received bootstrap", zap.Duration("after", time.Since(start).Round(time.Millisecond)))
		a.tracker.Set(state.Bootstrapped, "bootstrap received")
		return doc, nil
	case ctx.Err() != nil:
		a.log.Info("stopped while waiting for the control plane")
		return nil, nil
	case bootstrap.KindOf(err) == bootstrap.Permanent && !isTimeout(err):
		return nil, exitcode.AsConfig(err)
	default:
		return nil, err
	}
}

func isTimeout(err error) bool {
	var te *bootstrap.TimeoutError
	return errors.As(err, &te)
}

func (a *Agent) logWait(w bootstrap.Wait) {
	next := w.Next.Round(100 * time.Millisecond)
	if w.Err.Kind == bootstrap.MeshNotFound {
		detail := fmt.Sprintf("waiting for mesh %q (attempt %d, next in %s)", a.cfg.Mesh, w.Attempt, next)
		a.tracker.Set(state.WaitingForMesh, detail)
		a.log.Info("waiting for mesh: it does not exist on the control plane yet; create it and zoneproxy proceeds by itself",
			zap.String("mesh", a.cfg.Mesh), zap.Int("attempt", w.Attempt), zap.Duration("next", next))
		return
	}
	detail := fmt.Sprintf("waiting for the control plane (attempt %d, next in %s): %s", w.Attempt, next, w.Err.Msg)
	a.tracker.Set(state.WaitingForMesh, detail)
	a.log.Warn("bootstrap failed, retrying", zap.String("reason", w.Err.Error()),
		zap.Int("attempt", w.Attempt), zap.Duration("next", next))
}

func (a *Agent) request(wd *workDir, ev envoy.Version, caPEM []byte) *bootstrap.Request {
	dp := a.cfg.Dataplane()
	return &bootstrap.Request{
		Mesh:              dp.Mesh,
		Name:              dp.Name,
		ProxyType:         "dataplane",
		DataplaneResource: dp.JSON(),
		Version: bootstrap.Version{
			KumaDp: bootstrap.KumaDpVersion{
				Version: version.Version, GitTag: version.Version,
				GitCommit: version.Commit, BuildDate: version.BuildDate,
			},
			Envoy: bootstrap.EnvoyVersion{Version: ev.Version, Build: ev.Build, KumaDpCompatible: true},
		},
		CACert:          string(caPEM),
		DynamicMetadata: map[string]string{},
		ReadinessPort:   uint32(a.cfg.ReadinessPort),
		OperatingSystem: runtime.GOOS,
		Features:        []string{bootstrap.FeatureReusePort},
		Workdir:         wd.path,
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
