package inplace

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
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// After a reload, the adopted Envoy is replaced when it is not as this
// program would start it (upgrade.Refresh says when).

// adoptedEnvoyCheckWait bounds the wait, after a reload, for kuma-cp's
// stream: a new Envoy needs it, and kuma-cp holds the previous program's
// stream for its deregistration delay (10 s by default).
var adoptedEnvoyCheckWait = time.Minute

// RefreshAdopted runs after a reload, once kuma-cp's stream is back.
func (u *Upgrades) RefreshAdopted(ctx context.Context) {
	upgrade.Refresh{Log: u.h.Log, Wait: adoptedEnvoyCheckWait, Serving: u.h.Serving, Changes: u.adoptedEnvoyChanges, Replace: u.replaceEnvoy,
		Relay: func() upgrade.Relay { return moverOf(u.kit.Load()) }}.Run(ctx)
}

// adoptedEnvoyChanges says why the running Envoy is not the one this
// program would start, and the new bootstrap when that is a reason.
func (u *Upgrades) adoptedEnvoyChanges(ctx context.Context) (reasons []string, doc []byte, err error) {
	_, found, err := u.h.Sup.Envoy.Find(ctx, u.h.Config.EnvoyBinary, u.stateDirPath())
	if err != nil {
		return nil, nil, err
	}
	if running := u.h.Sup.Now(); running != nil && found.Version.Build != running.Build {
		reasons = append(reasons, "another Envoy build ("+running.Build+" -> "+found.Version.Build+")")
	}
	if changed := envoyFixedChanges(u.launch(), launchOf(u.h.Config)); len(changed) > 0 {
		reasons = append(reasons, "the configuration changes Envoy's launch ("+strings.Join(changed, ", ")+")")
	}
	doc, why := u.changedBootstrap(ctx, found.Version)
	if why != "" {
		reasons = append(reasons, why)
	}
	return reasons, doc, nil
}

// changedBootstrap asks the control plane for the bootstrap a new Envoy
// of version ev would get and compares it with the running Envoy's.
// Failing to ask is no reason to replace Envoy: it is logged.
func (u *Upgrades) changedBootstrap(ctx context.Context, ev envoy.Version) ([]byte, string) {
	kit, feature := u.kit.Load(), u.h.Feature()
	cannot := func(err error) ([]byte, string) {
		u.h.Log.Warn("after the reload, cannot compare the control plane's bootstrap with the running Envoy's; Envoy keeps its bootstrap", zap.Error(err))
		return nil, ""
	}
	doc, up, asked, err := u.offeredBootstrap(ctx, kit, feature, ev)
	switch {
	case !asked:
		return nil, ""
	case err != nil:
		return cannot(err)
	}
	changed, err := xds.BootstrapChanges(kit.Launch.Bootstrap, doc, bootstrap.AgentBuildFields...)
	if err != nil {
		return cannot(err)
	}
	if len(changed) == 0 {
		return nil, ""
	}
	if !reflect.DeepEqual(up, feature.Resumption().Upstream) {
		u.h.Log.Warn("the control plane's bootstrap changed where Envoy's xDS goes; the relay keeps its stream and Envoy its bootstrap: restart to apply it",
			zap.Strings("changed", changed))
		return nil, ""
	}
	return doc, "the control plane's bootstrap changed (" + strings.Join(changed, ", ") + ")"
}

// keepBootstrap makes kit's bootstrap the one the next program adopts and
// the cache starts Envoy on.
func (u *Upgrades) keepBootstrap(kit *Kit) error {
	if _, err := kit.Launch.Write(kit.Launch.A.Bootstrap, kit.Launch.Bootstrap); err != nil {
		return err
	}
	u.hmu.Lock()
	cache := u.held.cache
	u.hmu.Unlock()
	if feature := u.h.Feature(); feature != nil {
		cache.KeepBootstrap(kit.Launch.Bootstrap, feature.Resumption())
	}
	return nil
}

// restoreBootstrap puts the running Envoy's bootstrap back after a
// handover to a new one failed.
func (u *Upgrades) restoreBootstrap(log *zap.Logger) {
	kit := u.kit.Load()
	if _, err := kit.Launch.Write(kit.Launch.A.Bootstrap, kit.Launch.Bootstrap); err != nil {
		log.Warn("cannot put the running Envoy's bootstrap back; a reload may hand over again", zap.Error(err))
	}
}

// offeredBootstrap asks the control plane for the bootstrap a start of an
// Envoy of version ev would get, rewritten for the relay, and where it
// points the relay. asked is false when there is nothing to ask with: no
// bootstrap request kept, no Envoy launched yet, or direct mode.
func (u *Upgrades) offeredBootstrap(ctx context.Context, kit *Kit, feature Feature, ev envoy.Version) (doc []byte, up cpdial.Target, asked bool, err error) {
	u.hmu.Lock()
	refetch := u.held.refetch
	u.hmu.Unlock()
	if refetch == nil || kit == nil || feature == nil || feature.Resumption() == nil {
		return nil, up, false, nil
	}
	fetched, err := refetch(ctx, ev)
	if err != nil {
		return nil, up, true, err
	}
	doc, up, err = xds.Rewrite(fetched, kit.Socket)
	return doc, up, true, err
}
