package agent

import (
	"context"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// After a reload, the adopted Envoy is replaced when it is not as this
// program would start it (upgrade.Refresh says when).

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
	upgrade.Refresh{Log: a.log, Wait: adoptedEnvoyCheckWait, Serving: a.maint.serving.Load, Changes: a.adoptedEnvoyChanges, Replace: a.replaceEnvoy,
		Relay: func() upgrade.Relay {
			if kit := a.hand.kit.Load(); kit != nil && kit.xds != nil {
				return relayMove{kit.xds}
			}
			return nil
		}}.Run(ctx)
}

// adoptedEnvoyChanges says why the running Envoy is not the one this
// program would start, and the new bootstrap when that is a reason.
func (a *Agent) adoptedEnvoyChanges(ctx context.Context) (reasons []string, doc []byte, err error) {
	_, found, err := a.envoy.Find(ctx, a.cfg.EnvoyBinary, a.stateDirPath)
	if err != nil {
		return nil, nil, err
	}
	if running := a.sup.Now(); running != nil && found.Version.Build != running.Build {
		reasons = append(reasons, "another Envoy build ("+running.Build+" -> "+found.Version.Build+")")
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
	changed, err := xds.BootstrapChanges(kit.launch.Bootstrap, doc, bootstrap.AgentBuildFields...)
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
	if _, err := kit.wd.write(bootstrapFile, kit.launch.Bootstrap); err != nil {
		return err
	}
	r := &a.rl
	r.hmu.Lock()
	cache, feature := r.cache, r.feature
	r.hmu.Unlock()
	if feature != nil {
		cache.KeepBootstrap(kit.launch.Bootstrap, feature.Resumption())
	}
	return nil
}

// restoreBootstrap puts the running Envoy's bootstrap back after a
// handover to a new one failed.
func (a *Agent) restoreBootstrap(log *zap.Logger) {
	kit := a.hand.kit.Load()
	if _, err := kit.wd.write(bootstrapFile, kit.launch.Bootstrap); err != nil {
		log.Warn("cannot put the running Envoy's bootstrap back; a reload may hand over again", zap.Error(err))
	}
}
