package main

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// depRef names a resource another one needs before it is warm.
type depRef struct {
	typ, name string
	source    *corev3.ConfigSource
}

func clusterDeps(c *clusterv3.Cluster) []depRef {
	var out []depRef
	if c.GetType() == clusterv3.Cluster_EDS {
		name := c.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = c.GetName()
		}
		out = append(out, depRef{typeEndpoint, name, c.GetEdsClusterConfig().GetEdsConfig()})
	}
	out = append(out, socketDeps(c.GetTransportSocket())...)
	for _, m := range c.GetTransportSocketMatches() {
		out = append(out, socketDeps(m.GetTransportSocket())...)
	}
	return out
}

// socketDeps lists the SDS secrets (with an sds_config) a TLS socket needs.
func socketDeps(ts *corev3.TransportSocket) []depRef {
	if ts == nil {
		return nil
	}
	common, err := commonTLSContext(ts)
	if err != nil || common == nil {
		return nil
	}
	var out []depRef
	add := func(sc *tlsv3.SdsSecretConfig) {
		if sc != nil && sc.GetSdsConfig() != nil {
			out = append(out, depRef{typeSecret, sc.GetName(), sc.GetSdsConfig()})
		}
	}
	for _, sc := range common.GetTlsCertificateSdsSecretConfigs() {
		add(sc)
	}
	add(common.GetValidationContextSdsSecretConfig())
	add(common.GetCombinedValidationContext().GetValidationContextSdsSecretConfig())
	return out
}

func listenerDeps(l *listenerv3.Listener) []depRef {
	var out []depRef
	chains := append([]*listenerv3.FilterChain(nil), l.GetFilterChains()...)
	if l.GetDefaultFilterChain() != nil {
		chains = append(chains, l.GetDefaultFilterChain())
	}
	for _, fc := range chains {
		out = append(out, socketDeps(fc.GetTransportSocket())...)
		for _, f := range fc.GetFilters() {
			msg, err := unpackAny(f.GetTypedConfig())
			if err != nil {
				continue
			}
			if hcm, ok := msg.(*hcmv3.HttpConnectionManager); ok && hcm.GetRds() != nil {
				out = append(out, depRef{typeRoute, hcm.GetRds().GetRouteConfigName(), hcm.GetRds().GetConfigSource()})
			}
		}
	}
	return out
}
