package relay

import (
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

const listenerTypeURL = "type.googleapis.com/envoy.config.listener.v3.Listener"

// namedPortWarnMax bounds the SNIs a warning lists.
const namedPortWarnMax = 5

// namedPortWatch remembers the named-port SNIs last warned about, so a
// warning comes once per change, not on every push.
type namedPortWatch struct {
	mu   sync.Mutex
	last []string
}

// changed records snis and says whether they differ from the last ones
// warned about; none (listeners withheld, or every port numbered) leaves
// those as they were, so the same names coming back are not news.
func (w *namedPortWatch) changed(snis []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(snis) == 0 || slices.Equal(w.last, snis) {
		return false
	}
	w.last = snis
	return true
}

// namedPortSNIs are the MeshService SNIs (sni.msvc.…) the listeners
// match whose last segment, the port, is a name rather than a number,
// sorted. Undecodable listeners are skipped.
func namedPortSNIs(listeners []lkgcache.Resource) []string {
	var out []string
	for _, r := range listeners {
		for _, sni := range serverNames(r.Body) {
			if strings.HasPrefix(sni, "sni.msvc.") && !isPortNumber(sni[strings.LastIndex(sni, ".")+1:]) {
				out = append(out, sni)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Field numbers of the path to the SNIs a Listener matches:
// Listener.filter_chains, FilterChain.filter_chain_match,
// FilterChainMatch.server_names.
const (
	listenerFilterChainsField = 3
	filterChainMatchField     = 1
	matchServerNamesField     = 11
)

// serverNames reads the SNIs a Listener's filter chains match straight off
// the wire: the generated Listener type links Envoy's route, access-log
// and CEL protos, which cost the binary 3.2 MB for these three fields.
// A malformed listener yields what was read before the fault.
func serverNames(listener []byte) []string {
	var names []string
	_, chains, _ := splitRepeated(listener, listenerFilterChainsField)
	for _, chain := range chains {
		_, matches, _ := splitRepeated(chain, filterChainMatchField)
		for _, match := range matches {
			_, snis, _ := splitRepeated(match, matchServerNamesField)
			for _, sni := range snis {
				names = append(names, string(sni))
			}
		}
	}
	return names
}

func isPortNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// warnNamedPorts: kuma-cp 2.14.3's ingress matches a MeshService port's
// name (…backend.http) while its sidecars send the number (…backend.80),
// so such a service is unreachable through this ingress. Only 2.14 gives
// a state-of-the-world stream (p.replace), and there p holds every
// listener.
func (r *Relay) warnNamedPorts(p *pendingResponse) {
	if !p.replace || p.fromCache || p.typeURL != listenerTypeURL {
		return
	}
	snis := namedPortSNIs(p.resources)
	if !r.namedPorts.changed(snis) {
		return
	}
	r.log.Warn("kuma-cp 2.14 gives this ingress SNIs with MeshService port names, which its sidecars do not send "+
		"(they send the port number, e.g. …backend.80 for …backend.http): traffic from other zones to those services finds no match. "+
		"Remove the names from those MeshServices' ports while the control plane is Kuma 2.14 (Kuma 3.0 sends the name on both sides)",
		zap.Int("count", len(snis)), zap.Strings("sni", snis[:min(len(snis), namedPortWarnMax)]))
}
