package agent

import (
	"context"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// After a reload the new program keeps the running Envoy, and then hands
// over to a new one beside it when that Envoy would start otherwise now:
// --envoy-binary reports another build (a package brought a new Envoy),
// the configuration changes Envoy's launch (envoyLaunch), or the control
// plane answers a bootstrap request with another bootstrap (a kuma-cp
// upgrade changed its template). What the proxy is (mesh, name, ports,
// where xDS goes) a reload never changes: the reload refuses it.

// adoptedEnvoyCheckWait bounds the wait, after a reload, for kuma-cp's
// stream: a new Envoy needs it, and kuma-cp holds the previous program's
// stream for its deregistration delay (10 s by default).
var adoptedEnvoyCheckWait = time.Minute

// refetcher is rl.refetch: one bootstrap request as a start makes it.
func (a *Agent) refetcher(wd *workDir, client *bootstrap.Client) func(ctx context.Context, ev envoy.Version) ([]byte, error) {
	return func(ctx context.Context, ev envoy.Version) ([]byte, error) {
		f, err := a.fetcher(wd, client, ev)
		if err != nil {
			return nil, err
		}
		defer func() { go f.Close() }()
		return f.Attempt(ctx)
	}
}

// refreshAdoptedEnvoy runs after a reload, once kuma-cp's stream is back.
func (a *Agent) refreshAdoptedEnvoy(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, adoptedEnvoyCheckWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		kit := a.hand.kit.Load()
		if kit == nil || kit.xds == nil {
			return // direct mode: nothing feeds a second Envoy
		}
		if _, ok := kit.xds.FromControlPlane(); ok && a.maint.serving.Load() {
			break
		}
		select {
		case <-ctx.Done():
			a.log.Warn("after the reload, kuma-cp's stream did not come back in time to check whether Envoy must be replaced (another build, launch or bootstrap); `curl -X POST http://127.0.0.1:<readiness-port>/envoy/handover` starts a new Envoy by hand",
				zap.Duration("waited", adoptedEnvoyCheckWait))
			return
		case <-tick.C:
		}
	}
	reasons, doc, err := a.adoptedEnvoyChanges(ctx)
	switch {
	case err != nil:
		a.log.Error("after the reload, cannot tell whether Envoy must be replaced; the running Envoy keeps serving", zap.Error(err))
		return
	case len(reasons) == 0:
		a.log.Info("after the reload, the running Envoy is as this program would start it (build, launch, bootstrap); it keeps serving")
		return
	}
	why := strings.Join(reasons, "; ")
	if err := a.replaceEnvoy(ctx, why, doc); err != nil {
		a.log.Error("after the reload, a new Envoy could not take over; the running Envoy keeps serving", zap.String("why", why), zap.Error(err))
		return
	}
	a.log.Info("after the reload, a new Envoy took over: " + why)
}

// adoptedEnvoyChanges says why the running Envoy is not the one this
// program would start, and the new bootstrap when that is a reason.
func (a *Agent) adoptedEnvoyChanges(ctx context.Context) (reasons []string, doc []byte, err error) {
	_, found, err := a.envoy.Find(ctx, a.cfg.EnvoyBinary, a.stateDirPath)
	if err != nil {
		return nil, nil, err
	}
	if running := a.envoyNow.Load(); running != nil && found.Version.Build != running.build {
		reasons = append(reasons, "another Envoy build ("+running.build+" -> "+found.Version.Build+")")
	}
	if changed := envoyFixedChanges(a.rl.launch(), envoyLaunch(a.cfg)); len(changed) > 0 {
		reasons = append(reasons, "the configuration changes Envoy's launch ("+strings.Join(changed, ", ")+")")
	}
	doc, why := a.changedBootstrap(ctx, found.Version)
	if why != "" {
		reasons = append(reasons, why)
	}
	return reasons, doc, nil
}

// changedBootstrap asks the control plane for the bootstrap a new Envoy
// of version ev would get and compares it with the running Envoy's.
// Failing to ask is no reason to replace Envoy: it is logged.
func (a *Agent) changedBootstrap(ctx context.Context, ev envoy.Version) ([]byte, string) {
	r := &a.rl
	kit := a.hand.kit.Load()
	r.hmu.Lock()
	feature, refetch := r.feature, r.refetch
	r.hmu.Unlock()
	if refetch == nil || kit == nil || feature == nil || feature.Resumption() == nil {
		return nil, ""
	}
	cannot := func(err error) ([]byte, string) {
		a.log.Warn("after the reload, cannot compare the control plane's bootstrap with the running Envoy's; Envoy keeps its bootstrap", zap.Error(err))
		return nil, ""
	}
	fetched, err := refetch(ctx, ev)
	if err != nil {
		return cannot(err)
	}
	doc, up, err := xds.Rewrite(fetched, kit.wd.file(xds.SocketName))
	if err != nil {
		return cannot(err)
	}
	changed, err := xds.BootstrapChanges(kit.bootstrap, doc, bootstrap.AgentBuildFields...)
	if err != nil {
		return cannot(err)
	}
	if len(changed) == 0 {
		return nil, ""
	}
	if !reflect.DeepEqual(up, feature.Resumption().Upstream) {
		a.log.Warn("the control plane's bootstrap changed where Envoy's xDS goes; the relay keeps its stream and Envoy its bootstrap: restart to apply it",
			zap.Strings("changed", changed))
		return nil, ""
	}
	return doc, "the control plane's bootstrap changed (" + strings.Join(changed, ", ") + ")"
}

// keepBootstrap makes kit's bootstrap the one the next program adopts and
// the cache starts Envoy on.
func (a *Agent) keepBootstrap(kit *handoverKit) error {
	if _, err := kit.wd.write(bootstrapFile, kit.bootstrap); err != nil {
		return err
	}
	r := &a.rl
	r.hmu.Lock()
	cache, feature := r.cache, r.feature
	r.hmu.Unlock()
	if feature != nil {
		cache.KeepBootstrap(kit.bootstrap, feature.Resumption())
	}
	return nil
}

// restoreBootstrap puts the running Envoy's bootstrap back after a
// handover to a new one failed.
func (a *Agent) restoreBootstrap(log *zap.Logger) {
	kit := a.hand.kit.Load()
	if _, err := kit.wd.write(bootstrapFile, kit.bootstrap); err != nil {
		log.Warn("cannot put the running Envoy's bootstrap back; a reload may hand over again", zap.Error(err))
	}
}
