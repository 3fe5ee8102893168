package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/host/portshare"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// listenerCheckEvery paces the check that Envoy really has its zone
// listeners: Envoy goes LIVE without them when the control plane has
// nothing for this proxy to serve yet.
const listenerCheckEvery = time.Second

// zoneListener is one listener the control plane should send.
type zoneListener struct {
	name string // Envoy's listener name, e.g. self_zoneegress_dp_ze-port
	addr string // host:port
	host string
	port uint32
	why  string // when the control plane sends it, for the operator
}

func expectedListeners(cfg *config.Config) []zoneListener {
	var out []zoneListener
	for _, l := range cfg.Dataplane().Networking.Listeners {
		zl := zoneListener{name: l.EnvoyListenerName(), host: l.Address, port: l.Port,
			addr: net.JoinHostPort(l.Address, strconv.FormatUint(uint64(l.Port), 10))}
		zl.why = ZoneListenerCondition(l.Type)
		out = append(out, zl)
	}
	return out
}

// ZoneListenerCondition says when the control plane sends the listener of
// a zone listener type, and what the operator can do about it.
func ZoneListenerCondition(listenerType string) string {
	switch listenerType {
	case dataplane.TypeZoneIngress:
		return "the control plane sends the ingress listener only when this zone has a MeshService: create one (or deploy a service in this zone)"
	case dataplane.TypeZoneEgress:
		return "the control plane sends the egress listener only when a MeshIdentity selects this proxy and the mesh has a MeshExternalService: create them"
	}
	return "the control plane has not sent it"
}

type listenerLister interface {
	Listeners(ctx context.Context) ([]envoy.Listener, error)
}

// listenerWatch keeps READY honest: READY while every zone listener is in
// Envoy, NO_ZONE_LISTENER (with the reason and the fix) while one is not.
type listenerWatch struct {
	a       *Agent
	admin   listenerLister
	want    []zoneListener
	missing []string // nil until the first successful check
	checked bool

	envoyPID  int               // whose sockets are ours, for the port-sharing check
	shared    map[string]string // metrics listener address → what was last warned
	lastShare time.Time

	detail string // what NO_ZONE_LISTENER last said
	// A rejected zone listener's port is free: the serve loop restarts
	// Envoy (bindfailure.go).
	rebindOnce         sync.Once
	rebind             chan struct{}
	rebindAsked        bool
	pacedLogged        bool
	unconfiguredLogged bool
}

// check asks Envoy once and publishes the result when it changed. An
// unanswered question changes nothing.
func (w *listenerWatch) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, adminBudget)
	defer cancel()
	have, err := w.admin.Listeners(ctx)
	if err != nil {
		w.a.log.Debug("cannot list Envoy's listeners", zap.Error(err))
		if !w.checked {
			w.a.tracker.Set(state.Ready, w.a.generationWords(w.a.xds.servingDetail()))
		}
		return
	}
	w.checkSharedMetricsPorts(have)
	var missing []zoneListener
	var names, present []string
	for _, zl := range w.want {
		in := slices.ContainsFunc(have, func(l envoy.Listener) bool { return l.Name == zl.name })
		w.a.opts.Metrics.ZoneListener(zl.name, in)
		if in {
			present = append(present, zl.name)
		} else {
			missing = append(missing, zl)
			names = append(names, zl.name)
		}
	}
	w.a.bindState().settle(present, len(missing) == 0)
	w.checkBindFailures(missing)
	var b strings.Builder
	for i, zl := range missing {
		if i > 0 {
			b.WriteString("; ")
		}
		// A listener Envoy could not bind is no matter of the control plane's.
		if why, ok := w.bindDetail(zl); ok {
			b.WriteString(why)
			continue
		}
		fmt.Fprintf(&b, "Envoy has no listener %s (%s): %s", zl.name, zl.addr, zl.why)
	}
	if w.checked && slices.Equal(names, w.missing) && b.String() == w.detail {
		return
	}
	w.checked, w.missing, w.detail = true, names, b.String()
	if len(missing) == 0 {
		w.a.tracker.Set(state.Ready, w.a.generationWords(w.a.xds.servingDetail()))
		if len(w.want) > 0 {
			w.a.log.Info("zone listeners present", zap.Strings("listeners", listenerNames(w.want)))
		}
		return
	}
	w.a.tracker.Set(state.NoZoneListener, b.String())
	w.a.log.Warn("Envoy is live but serves nothing: "+b.String(), zap.Strings("missing", names))
}

// run checks until ctx ends.
func (w *listenerWatch) run(ctx context.Context) {
	tick := time.NewTicker(listenerCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.check(ctx)
		}
	}
}

func listenerNames(ls []zoneListener) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.name
	}
	return out
}

// metricsListenerPrefix names the listeners of MeshMetric Prometheus backends.
const metricsListenerPrefix = "system_meshmetric_prometheus_"

// shareCheckEvery paces the scan of /proc for another process on a
// MeshMetric port; a change of listeners triggers it at once.
const shareCheckEvery = 30 * time.Second

// checkSharedMetricsPorts warns when another process (another mesh's zone
// proxy on this host) listens on the port of a MeshMetric Prometheus
// listener: with SO_REUSEPORT both bind it and scrapes land on either.
func (w *listenerWatch) checkSharedMetricsPorts(have []envoy.Listener) {
	if w.envoyPID == 0 {
		return
	}
	current := map[string]bool{}
	for _, l := range have {
		if strings.HasPrefix(l.Name, metricsListenerPrefix) {
			current[l.Address] = true
		}
	}
	changed := len(current) != len(w.shared)
	for addr := range current {
		if _, ok := w.shared[addr]; !ok {
			changed = true
		}
	}
	if !changed && time.Since(w.lastShare) < shareCheckEvery {
		return
	}
	w.lastShare = time.Now()
	next := map[string]string{}
	for addr := range current {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			continue
		}
		pids, unseen, err := portshare.Others(ap, w.envoyPID)
		verdict := ""
		if err == nil && (len(pids) > 0 || unseen > 0) {
			verdict = fmt.Sprintf("%v/%d", pids, unseen)
		}
		next[addr] = verdict
		if verdict != "" && w.shared[addr] != verdict {
			w.a.log.Warn("another process listens on the port of this zone proxy's MeshMetric Prometheus listener: with SO_REUSEPORT both receive scrapes, so Prometheus sees either mesh's metrics at random; give each mesh's MeshMetric its own port (prometheus.port)",
				zap.String("address", addr), zap.Ints("pids", pids), zap.Int("unseen sockets", unseen))
		}
	}
	w.shared = next
}
