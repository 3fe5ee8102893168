// Package controlplane is a stand-in for kuma-cp's DP server: the
// /bootstrap endpoint and delta ADS (plus HDS) on one TLS port, strict
// where the real CP is strict (docs: kuma-contract.md, kuma-live.md), so
// the zoneproxy agent can be tested without a real control plane.
//
// Like kuma-cp (pkg/xds/bootstrap/generator.go), /bootstrap checks the
// request's host with x509 VerifyHostname against the DP server
// certificate: an IP must equal an IP SAN, a name matches a DNS SAN
// case-insensitively, and "*.example.com" covers exactly one more label
// (not example.com, not a.b.example.com). A miss is 400 with kuma-cp's
// SANMismatchErr text. kuma-cp before the v3 module compared by exact set
// membership, with another text; that version is not modelled.
//
// A /bootstrap request costs 1.1–1.6 ms of CPU and 0.5 MiB allocated
// (BenchmarkBootstrapHandler on the 2-core bench machine; 2.5 ms wall in
// `make bench`, where each request meets cold caches). Nine tenths of it is
// writing the bootstrap as kuma-cp writes it, per request too
// (pkg/xds/bootstrap/handler.go: proto.ToYAML, protojson then
// sigs.k8s.io/yaml); the rest is decoding the request, parsing and
// validating the Dataplane and building and validating the bootstrap.
// Nothing is re-read or re-parsed per request: the certificates and the SAN
// set are loaded at start (kuma-cp re-reads its certificate file per
// request), and leaving out the serialisation would make it faster.
//
// Its TLS is faster than kuma-cp's default, though: the DP server's key is
// ECDSA P-256, signed by a separate CA, where kuma-cp generates a
// self-signed RSA 2048 certificate for itself (pkg/tls/cert.go,
// DefaultKeyType), whose signature makes each handshake about 1.4 ms
// longer on the 2-core bench machine (1.2 → 2.6 ms for a Go client).
// Options.RSAServerKey (testcp --rsa-server-key) gives the server an RSA
// 2048 key; zpbench reports start-up against both. Operators' own
// certificates may have either kind of key.
//
// With Options.ReloadableTokens (kuma-cp's
// dpServer.authn.enableReloadableTokens, testcp --reloadable-tokens) and a
// dataplaneTokenPath in the request, ADS and HDS are google_grpc to the
// xDS host:port (stat_prefix ads, credentials factory and call credentials
// envoy.grpc_credentials.file_based_metadata reading that path, ssl root
// certs = the CA, kuma-cp's keepalive channel args and a 4 MiB
// grpc.max_receive_message_length), with no initial_metadata and no
// system_ads cluster. Without a path the token is baked in as when the
// setting is off. ADS authenticates the stream's authorization metadata
// either way. Older kuma-cp releases rendered fewer channel args (none,
// then the three keepalive ones); only the newest shape is modelled.
//
// Zone listeners are built as kuma-cp builds them: stat_prefix is the
// listener name, tls_inspector with its defaults (15 s
// listener_filters_timeout, no continue_on_listener_filters_timeout), and
// one filter chain for DestinationSNI with transport_protocol "tls", so
// only a TLS ClientHello naming that SNI becomes a connection in Envoy.
//
// Deliberate differences from kuma-cp:
//   - One RSA key (kid "1") is trusted for every mesh, like offline-issued
//     tokens in dpServer.authn.dpProxy.dpToken.validator.publicKeys, so a
//     token can be issued before its mesh exists. A token for another mesh
//     therefore fails on its Mesh claim rather than on its signature.
//   - There is no Dataplane store: /bootstrap without dataplaneResource is
//     always 404, and ADS needs dataplane.resource in the node metadata.
//   - xDS is fixed: per listener an SNI passthrough (tcp_proxy) to a
//     pretend MeshService "backend" (ingress, EDS) or MeshExternalService
//     "httpbin" (egress, STATIC 127.0.0.1:8080), plus system_envoy_admin and
//     system_probe_readiness. No MeshIdentity/SDS is modelled, and the
//     public admin listener (networking.address != 127.0.0.1) is not sent.
//   - Without caCert in the request, Envoy is told to trust this server's
//     CA (ca.pem), which is what kuma-cp's self-signed default amounts to.
//
// Admin API (plain HTTP, JSON) on Options.AdminAddr:
//
//	PUT    /meshes/{name}          201 created / 200 existed, body {}
//	DELETE /meshes/{name}          200 / 404
//	GET    /meshes                 {"items":[{"type":"Mesh","name":…}],"next":null,"total":n}
//	POST   /tokens/dataplane       {"mesh","name","workload","tags","type","validFor":"24h"} -> 200 text/plain JWT
//	GET    /proxies                [ProxyInfo…]
//	GET    /faults, PUT /faults    Faults as JSON, bootstrapDelay as "2s"
//	POST   /restart?down=2s        answers once the DP listener is back
//	GET    /bootstrap-requests     {"count":n,"dropped":d,"records":[BootstrapRecord…]} (body base64; the newest 1000, d older ones let go)
//	GET    /ready                  200 READY
//
// Observability policies on a zone proxy (observability*.go), by node id
// mesh/name, attached before or after it connects; every change is pushed
// as a new snapshot (the version is a hash of the resources):
//
//	GET    /proxies/{mesh}/{name}/policies                  ProxyPolicies
//	PUT    /proxies/{mesh}/{name}/meshaccesslogs/{policy}   kuma's MeshAccessLog `default` (Tcp, File backends)
//	PUT    /proxies/{mesh}/{name}/meshmetrics/{policy}      kuma's MeshMetric `default` (sidecar, backends)
//	DELETE /proxies/{mesh}/{name}/{meshaccesslogs|meshmetrics}/{policy}
//	PUT    /proxies/{mesh}/{name}/zone-listeners            {"withheld": true|false}
//
// Go API: SetMeshAccessLog, SetMeshMetric, Delete…, WithholdZoneListeners,
// SetPolicies, LoadPolicies (testcp --policies FILE). Bodies are decoded
// strictly; errors name the field (backends[0].tcp.address: …).
//
// What is generated (kuma-observability.md §1.2, §2.2), with paths from
// pkg/kumasock and the bootstrap's workdir metadata:
//   - MeshAccessLog: an envoy.access_loggers.file per backend, in every
//     filter chain of the zone listeners (tcp_proxy and HCM), Tcp backends
//     to the FIFO kuma-al-<name>-<mesh>.sock with json_format {address,
//     message}, the message the default TCP format or Plain text plus "\n"
//     or the Json object, %KUMA_*% expanded (source service "unknown",
//     source address networking.address); tcp_proxy gets
//     flush_access_log_on_connected. All policies add loggers, by name.
//   - MeshMetric: per Prometheus backend a listener and a STATIC cluster
//     system_meshmetric_prometheus_<clientId> (<networking.address>:<port>,
//     enable_reuse_port as for zone listeners, prefix <path> rewritten to
//     /meshmetric on kuma-mh-<name>-<mesh>.sock); per OpenTelemetry backend
//     (direct mode) a listener on kuma-otel-<b>.sock and an HTTP/2 cluster
//     system_meshmetric_otel_<b> to its endpoint; and system_dynamicconfig
//     on kuma-mesh-metric-config.sock serving /meshmetric (304 route on
//     If-None-Match == hex(sha256(body)), 200 route with the body and Etag,
//     404 otherwise). extraLabels: mesh, zone (label kuma.io/zone, else
//     "default"), kuma.proxy_role. Removing the last policy removes them all.
//   - Withheld zone listeners: the zone listeners and their clusters are
//     not sent (an ingress without MeshService, an egress without
//     MeshIdentity/MeshExternalService); admin and readiness clusters are.
//
// Where this differs from kuma-cp: no targetRef, rules or matches (a
// policy is attached to one proxy; several MeshMetrics merge by name, the
// last one's sidecar and backends winning); MeshAccessLog OpenTelemetry
// backends and CEL filters are not modelled; an OpenTelemetry MeshMetric
// backend is given inline (name, endpoint) instead of a backendRef to a
// MeshOpenTelemetryBackend; OTel is always direct mode, even when the
// proxy advertises feature-otel-via-kuma-dp (no /otel route); MeshMetric
// ProvidedTLS and `applications` are not accepted; %KUMA_WORKLOAD% expands
// to "". A build error after connect keeps the previous snapshot.
package controlplane
