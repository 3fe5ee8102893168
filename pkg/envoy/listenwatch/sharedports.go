package listenwatch

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/host/portshare"
)

// metricsListenerPrefix names the listeners of MeshMetric Prometheus backends.
const metricsListenerPrefix = "system_meshmetric_prometheus_"

// shareCheckEvery paces the scan of /proc for another process on a
// MeshMetric port; a change of listeners triggers it at once.
const shareCheckEvery = 30 * time.Second

// checkSharedMetricsPorts warns when another process (another mesh's zone
// proxy on this host) listens on the port of a MeshMetric Prometheus
// listener: with SO_REUSEPORT both bind it and scrapes land on either.
func (p *Period) checkSharedMetricsPorts(have []envoy.Listener) {
	if p.envoyPID == 0 {
		return
	}
	current := map[string]bool{}
	for _, l := range have {
		if strings.HasPrefix(l.Name, metricsListenerPrefix) {
			current[l.Address] = true
		}
	}
	changed := len(current) != len(p.shared)
	for addr := range current {
		if _, ok := p.shared[addr]; !ok {
			changed = true
		}
	}
	if !changed && time.Since(p.lastShare) < shareCheckEvery {
		return
	}
	p.lastShare = time.Now()
	next := map[string]string{}
	for addr := range current {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			continue
		}
		pids, unseen, err := portshare.Others(ap, p.envoyPID)
		verdict := ""
		if err == nil && (len(pids) > 0 || unseen > 0) {
			verdict = fmt.Sprintf("%v/%d", pids, unseen)
		}
		next[addr] = verdict
		if verdict != "" && p.shared[addr] != verdict {
			p.w.opts.Log.Warn("another process listens on the port of this zone proxy's MeshMetric Prometheus listener: with SO_REUSEPORT both receive scrapes, so Prometheus sees either mesh's metrics at random; give each mesh's MeshMetric its own port (prometheus.port)",
				zap.String("address", addr), zap.Ints("pids", pids), zap.Int("unseen sockets", unseen))
		}
	}
	p.shared = next
}
