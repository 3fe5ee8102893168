package main

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// matchLevel scores one FilterChainMatch criterion for a socket: -1 when
// it does not match, otherwise higher for more specific (0 = unset).
type matchLevel func(m *listenerv3.FilterChainMatch, s *socketInfo) int

// Envoy's FilterChainManagerImpl levels, in its order. At each level only
// the most specific matches go on, and there is no backtracking: a socket
// that ends with no chain gets the default_filter_chain, if any.
var matchLevels = []matchLevel{
	matchDestinationPort,
	func(m *listenerv3.FilterChainMatch, s *socketInfo) int {
		return matchPrefixes(m.GetPrefixRanges(), s.local)
	},
	matchServerName,
	matchTransport,
	matchALPN,
	func(m *listenerv3.FilterChainMatch, s *socketInfo) int {
		return matchPrefixes(m.GetDirectSourcePrefixRanges(), s.remote)
	},
	matchSourceType,
	func(m *listenerv3.FilterChainMatch, s *socketInfo) int {
		return matchPrefixes(m.GetSourcePrefixRanges(), s.remote)
	},
	matchSourcePort,
}

func matchFilterChain(l *listenerv3.Listener, s *socketInfo) *listenerv3.FilterChain {
	cands := l.GetFilterChains()
	for _, level := range matchLevels {
		best, kept := -1, []*listenerv3.FilterChain(nil)
		for _, fc := range cands {
			score := level(fc.GetFilterChainMatch(), s)
			switch {
			case score < 0 || score < best:
			case score > best:
				best, kept = score, []*listenerv3.FilterChain{fc}
			default:
				kept = append(kept, fc)
			}
		}
		cands = kept
		if len(cands) == 0 {
			return l.GetDefaultFilterChain()
		}
	}
	return cands[0]
}

func addrPort(a net.Addr) (netip.AddrPort, bool) {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort(), true
	}
	return netip.AddrPort{}, false
}

func matchDestinationPort(m *listenerv3.FilterChainMatch, s *socketInfo) int {
	if m.GetDestinationPort() == nil {
		return 0
	}
	if ap, ok := addrPort(s.local); ok && uint32(ap.Port()) == m.GetDestinationPort().GetValue() {
		return 1
	}
	return -1
}

// matchPrefixes prefers the longest matching CIDR range.
func matchPrefixes(ranges []*corev3.CidrRange, a net.Addr) int {
	if len(ranges) == 0 {
		return 0
	}
	ap, ok := addrPort(a)
	if !ok {
		return -1
	}
	ip := ap.Addr().Unmap()
	best := -1
	for _, r := range ranges {
		base, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			continue
		}
		p, err := base.Unmap().Prefix(int(r.GetPrefixLen().GetValue()))
		if err == nil && p.Contains(ip) && p.Bits()+1 > best {
			best = p.Bits() + 1
		}
	}
	return best
}

// matchServerName: an exact name beats "*.suffix" wildcards, and a longer
// suffix beats a shorter one; a wildcard never matches the bare suffix.
func matchServerName(m *listenerv3.FilterChainMatch, s *socketInfo) int {
	names := m.GetServerNames()
	if len(names) == 0 {
		return 0
	}
	best := -1
	for _, n := range names {
		switch {
		case s.serverName == "":
		case n == s.serverName:
			return 1 << 20
		case strings.HasPrefix(n, "*.") && strings.HasSuffix(s.serverName, n[1:]) && len(s.serverName) > len(n)-1:
			best = max(best, len(n))
		}
	}
	return best
}

func matchTransport(m *listenerv3.FilterChainMatch, s *socketInfo) int {
	switch m.GetTransportProtocol() {
	case "":
		return 0
	case s.transport:
		return 1
	}
	return -1
}

// matchALPN: the first protocol the client offers that a chain names wins.
func matchALPN(m *listenerv3.FilterChainMatch, s *socketInfo) int {
	if len(m.GetApplicationProtocols()) == 0 {
		return 0
	}
	for i, p := range s.alpn {
		if slices.Contains(m.GetApplicationProtocols(), p) {
			return len(s.alpn) - i
		}
	}
	return -1
}

func matchSourceType(m *listenerv3.FilterChainMatch, s *socketInfo) int {
	local := true
	if r, ok := addrPort(s.remote); ok {
		l, _ := addrPort(s.local)
		local = r.Addr().Unmap().IsLoopback() || r.Addr().Unmap() == l.Addr().Unmap()
	}
	switch m.GetSourceType() {
	case listenerv3.FilterChainMatch_ANY:
		return 0
	case listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK:
		if local {
			return 1
		}
	case listenerv3.FilterChainMatch_EXTERNAL:
		if !local {
			return 1
		}
	}
	return -1
}

func matchSourcePort(m *listenerv3.FilterChainMatch, s *socketInfo) int {
	if len(m.GetSourcePorts()) == 0 {
		return 0
	}
	if r, ok := addrPort(s.remote); ok && slices.Contains(m.GetSourcePorts(), uint32(r.Port())) {
		return 1
	}
	return -1
}
