package main

import (
	"net"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestFilterChainMatch(t *testing.T) {
	chain := func(name string, m *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
		return &listenerv3.FilterChain{Name: name, FilterChainMatch: m}
	}
	exact := chain("exact", &listenerv3.FilterChainMatch{ServerNames: []string{"api.example.com"}, TransportProtocol: "tls"})
	wild := chain("wild", &listenerv3.FilterChainMatch{ServerNames: []string{"*.example.com"}, TransportProtocol: "tls"})
	deeper := chain("deeper", &listenerv3.FilterChainMatch{ServerNames: []string{"*.eu.example.com"}})
	anyTLS := chain("any-tls", &listenerv3.FilterChainMatch{TransportProtocol: "tls"})
	h2 := chain("h2", &listenerv3.FilterChainMatch{ServerNames: []string{"alpn.test"}, ApplicationProtocols: []string{"h2"}})
	h1 := chain("h1", &listenerv3.FilterChainMatch{ServerNames: []string{"alpn.test"}, ApplicationProtocols: []string{"http/1.1"}})
	port := chain("port", &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(10002), ServerNames: []string{"port.test"}})
	loopOnly := chain("loopback", &listenerv3.FilterChainMatch{ServerNames: []string{"src.test"}, SourceType: listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK})
	external := chain("external", &listenerv3.FilterChainMatch{ServerNames: []string{"src.test"}, SourceType: listenerv3.FilterChainMatch_EXTERNAL})
	cidr := chain("cidr", &listenerv3.FilterChainMatch{ServerNames: []string{"cidr.test"}, SourcePrefixRanges: []*corev3.CidrRange{{AddressPrefix: "10.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}})
	catchAll := chain("catch-all", &listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer"})
	fallback := chain("default", nil)

	kumaLike := &listenerv3.Listener{FilterChains: []*listenerv3.FilterChain{chain("zone", &listenerv3.FilterChainMatch{
		ServerNames: []string{"sni.extsvc.payments.default.httpbin.80"}, TransportProtocol: "tls"})}}
	withDefault := &listenerv3.Listener{FilterChains: kumaLike.FilterChains, DefaultFilterChain: fallback}
	many := &listenerv3.Listener{FilterChains: []*listenerv3.FilterChain{exact, wild, deeper, anyTLS, catchAll, h2, h1, port, loopOnly, external, cidr}}

	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10003}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	tests := []struct {
		name string
		l    *listenerv3.Listener
		sock socketInfo
		want string // "" = no chain
	}{
		{"kuma zone listener: ClientHello with its SNI", kumaLike, socketInfo{transport: "tls", serverName: "sni.extsvc.payments.default.httpbin.80"}, "zone"},
		{"kuma zone listener: other SNI", kumaLike, socketInfo{transport: "tls", serverName: "sni.extsvc.payments.default.other.80"}, ""},
		{"kuma zone listener: TLS without SNI", kumaLike, socketInfo{transport: "tls"}, ""},
		{"kuma zone listener: plain bytes", kumaLike, socketInfo{transport: "raw_buffer"}, ""},
		{"no match falls to the default chain", withDefault, socketInfo{transport: "raw_buffer"}, "default"},
		{"exact name beats wildcard", many, socketInfo{transport: "tls", serverName: "api.example.com"}, "exact"},
		{"wildcard matches one label", many, socketInfo{transport: "tls", serverName: "web.example.com"}, "wild"},
		{"wildcard matches several labels", many, socketInfo{transport: "tls", serverName: "a.b.example.com"}, "wild"},
		{"longest wildcard wins, without backtracking", many, socketInfo{transport: "raw_buffer", serverName: "x.eu.example.com"}, "deeper"},
		{"wildcard never matches the bare suffix", many, socketInfo{transport: "tls", serverName: "example.com"}, "any-tls"},
		{"no backtracking to a less specific name", many, socketInfo{transport: "raw_buffer", serverName: "web.example.com"}, ""},
		{"first offered ALPN decides", many, socketInfo{transport: "tls", serverName: "alpn.test", alpn: []string{"http/1.1", "h2"}}, "h1"},
		{"ALPN nobody names", many, socketInfo{transport: "tls", serverName: "alpn.test", alpn: []string{"h3"}}, ""},
		{"plain bytes without SNI", many, socketInfo{transport: "raw_buffer"}, "catch-all"},
		{"destination port matches", many, socketInfo{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10002}, transport: "tls", serverName: "port.test"}, "port"},
		{"the port level comes first", many, socketInfo{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10002}, transport: "tls", serverName: "api.example.com"}, ""},
		{"destination port differs", many, socketInfo{local: local, transport: "tls", serverName: "port.test"}, "any-tls"},
		{"loopback source", many, socketInfo{local: local, remote: loopback, transport: "tls", serverName: "src.test"}, "loopback"},
		{"external source", many, socketInfo{local: local, remote: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}, transport: "tls", serverName: "src.test"}, "external"},
		{"source prefix matches", many, socketInfo{local: local, remote: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 1}, transport: "tls", serverName: "cidr.test"}, "cidr"},
		{"source prefix differs", many, socketInfo{local: local, remote: loopback, transport: "tls", serverName: "cidr.test"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchFilterChain(tt.l, &tt.sock)
			name := ""
			if got != nil {
				name = got.GetName()
			}
			if name != tt.want {
				t.Fatalf("chain %q, want %q", name, tt.want)
			}
		})
	}
}
