package main

import "testing"

// Types Kuma puts in bootstraps and zone proxy resources must resolve.
func TestTypesResolve(t *testing.T) {
	for _, name := range []string{
		"envoy.extensions.access_loggers.file.v3.FileAccessLog",
		"envoy.extensions.access_loggers.grpc.v3.TcpGrpcAccessLogConfig",
		"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
		"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
		"envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer",
		"envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
		"envoy.extensions.regex_engines.v3.GoogleRE2",
		"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
		"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
		"envoy.extensions.filters.network.rbac.v3.RBAC",
		"envoy.extensions.filters.network.sni_cluster.v3.SniCluster",
		"envoy.extensions.filters.network.direct_response.v3.Config",
		"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
		"envoy.extensions.filters.listener.original_dst.v3.OriginalDst",
		"envoy.extensions.filters.http.router.v3.Router",
		"envoy.extensions.filters.http.rbac.v3.RBAC",
		"envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
		"envoy.extensions.filters.http.fault.v3.HTTPFault",
		"envoy.extensions.filters.http.lua.v3.Lua",
		"envoy.extensions.clusters.aggregate.v3.ClusterConfig",
		"envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig",
		"envoy.config.grpc_credential.v3.FileBasedMetadataConfig",
		"envoy.config.trace.v3.ZipkinConfig",
		"envoy.admin.v3.ConfigDump",
		"udpa.type.v1.TypedStruct",
		"xds.type.v3.TypedStruct",
	} {
		if _, err := typeResolver.FindMessageByURL("type.googleapis.com/" + name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
