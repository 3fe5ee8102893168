// Package controlplane is a stand-in for kuma-cp's DP server: the
// /bootstrap endpoint and delta ADS (plus HDS) on one TLS port, strict
// where the real CP is strict (docs: kuma-contract.md, kuma-live.md), so
// the zoneproxy agent can be tested without a real control plane. It
// models kuma-cp 3.0 by default and 2.14.3 with Options.Kuma "2.14"
// (testcp --kuma 2.14; see "Kuma 2.14 mode" below).
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
// With Options.Services (testcp --services N) a zone ingress carries N
// MeshServices, as kuma-cp sends an ingress of a zone with that many:
// "backend" and ServiceName(1) on, each an EDS cluster, its
// ClusterLoadAssignment (EndpointsPerService loopback endpoints that
// nothing dials) and a filter chain for its ServiceSNI on every
// ZoneIngress listener; zpbench's footprint under a large configuration
// uses it.
//
// # Stream lifecycle and the Dataplane store
//
// ADS streams (delta; SotW too in 2.14 mode) follow kuma-cp's callbacks (pkg/xds/server/callbacks:
// dataplane_callbacks.go, dataplane_lifecycle.go), in kuma-cp's order on
// the first request that carries a node: auth (the Dataplane from the node
// metadata dataplane.resource, then the credential), then one active
// stream per node id (another stream from a node that is active is
// refused with exactly "there is already an active stream from this node,
// try again later"), then the proxy type and "proxyId … does not match
// proxy resource …", then the registration: the Dataplane is upserted
// into the store (created only if its mesh exists, "could not register
// proxy passed in kuma-dp run: mesh of name <m> is not found"; an update
// needs the stream's credential to be good for the stored Dataplane too),
// and the callback sleeps Options.CacheExpiration
// (store.cache.expirationTime, 1 s) inline before the proxy counts as
// connected, so the first response on an accepted stream comes at least
// that long after the upsert. Only then is the node's snapshot set.
//
// When the stream holding a node closes, the handler runs the
// deregistration before it releases the node, as kuma-cp's onStreamClosed
// does: the node stays active, refusing every new stream, for
// Options.DeregistrationDelay (xdsServer.dataplaneDeregistrationDelay,
// 10 s); then the Dataplane is deleted from the store, then the node is
// released. A stream that registered nothing (refused by the proxy type
// or id check, or its upsert failed) releases the node at once. The
// lifecycle's timers do not fire while the Hang fault is set.
//
// Restart(down) is a CP restart: what kuma-cp holds in memory is gone (no
// node is active; pending deregistrations are dropped without deleting,
// as in kuma-cp's graceful-shutdown branch; streams cut by the restart
// start none), while the store (meshes, Dataplanes, the token key)
// persists. Close is a graceful shutdown: nothing is deleted. DeleteMesh
// deletes the mesh's Dataplanes with it.
//
// Proxies() keeps its ProxyInfo per node id; Connected follows kuma-cp:
// true once the CacheExpiration sleep ended (ConnectedAt is that moment),
// false from the moment the stream closed (or the CP restarted).
//
// Zone egresses: ZoneEgresses(mesh) is what kuma-cp's
// resolveZoneEgresses (pkg/xds/context/mesh_context_builder.go) hands the
// mesh's sidecars: every Dataplane of the mesh, by name, with its
// listeners of type ZoneEgress whose state is Ready (the enum's zero
// value; NotReady is left out); online status is not looked at, so an
// egress whose stream closed is handed out until its Dataplane is
// deleted. It is computed over the store as it was
// Options.EgressPropagation ago: kuma-cp's sidecars see a store change
// through the read-only manager's LIST cache (store.cache.expirationTime,
// 1 s), then the mesh context cache (the same TTL, 1 s), read by each
// sidecar's watchdog every xdsServer.dataplaneConfigurationRefreshInterval
// (1 s); the default, 3 s, is that worst case (from about 0 s when every
// cache has just expired). StoredZoneEgresses is the set without the lag
// and ZoneEgressTimeline each change: At (store) and EffectiveAt
// (At+EgressPropagation, at the sidecars). No sidecar is modelled beyond
// that. Where it is less strict than kuma-cp: the lag is a plain shift,
// so a Dataplane deleted and upserted again within a few hundred
// milliseconds (a restart's release and the next stream's registration)
// reaches the sidecars as a gap just as long; kuma-cp's caches sample the
// store once per expiration period, and a sample that falls inside the
// gap keeps the egress away from the sidecars for about that period (1 s).
//
// The store keeps every change (the newest 100000): Dataplane,
// Dataplanes, DataplaneTimeline, and DataplaneGaps for the intervals a
// Dataplane was absent. NodeStream(nodeID) reports the stream holding a
// node, whether it is connected, since when a closed one deregisters, and
// the refusals. Timings() reports the three durations in force; zero
// Options are kuma-cp's defaults (DefaultDeregistrationDelay 10 s,
// DefaultCacheExpiration 1 s, DefaultEgressPropagation 3 s) and negative
// ones none. test/harness runs zones with FastLifecycle (the same ratios,
// a fifth: 2 s, 200 ms, 600 ms); testcp has --deregistration-delay,
// --cache-expiration and --egress-propagation.
//
// # Kuma 2.14 mode
//
// Options.Kuma "2.14" models kuma-cp 2.14.3 (checked against its source at
// v2.14.3 and kuma-214.md's measurements); "3.0", the default, keeps the
// behaviour described everywhere else here. GET /version says which
// ({"kuma","version","sotw"}); the start log line names the version.
//   - Bootstrap (pkg/xds/bootstrap/template_v3.go): ads_config is GRPC
//     (SotW) unless the request advertises feature-delta-grpc; the ADS and
//     access log clusters are ads_cluster and access_log_sink unless it
//     advertises feature-unified-resource-naming (system_ads and
//     system_access_log_sink then, as 3.0 always); HDS is GRPC on the ADS
//     cluster, as in 3.0; stats tags add kafka_name and kafka_type.
//   - SotW ADS is served, through go-control-plane's SotW server on the
//     same snapshot cache, ordered (sotw.WithOrderedADS, as 2.14.3), with
//     the callbacks delta streams have (pkg/xds/server/v3/components.go
//     wires the same chain for both): auth, one stream per node across
//     both protocols (a SotW stream is refused while a delta one holds the
//     node, and the reverse), registration, the deregistration delay, the
//     faults and the snapshots. Each protocol's go-control-plane stream ids
//     are mapped to one id space (streamIDs). ProxyInfo.Protocol says which
//     protocol a proxy's stream used. In 3.0 mode a SotW stream is
//     refused with Unimplemented ("unknown method …"), as gRPC refuses a
//     method it does not register and as kumahq/kuma#17040 describes 3.0;
//     kuma-cp master 348b6528 still registers SotW and never answers it
//     (no callbacks are wired for it), which Options.SotWNeverAnswered
//     models. Both shapes are real; an agent must handle either.
//   - Upgrade(kuma, down) replaces the control plane by the other release
//     mid-run, as an operator does across kuma-cp's upgrade or rollback:
//     connections drop, and it comes back on the same address, CA and
//     token key with the new release's bootstrap, protocols and GET
//     /version. The Dataplane store is emptied (kuma-cp's memory store
//     restarts empty); meshes are kept, where a real operator applies them
//     again.
//   - A type with no resources since the node connected has the empty
//     version (reconcile.go autoVersion against a cleared snapshot), which
//     a SotW request carries until answered: that type is never answered.
//     So an ingress with its zone listeners withheld (no MeshService) gets
//     no LDS at all and Envoy stays INITIALIZING; 3.0's delta sends an
//     empty LDS. Emptying a type later is a new version, sent empty.
//   - Zone listeners carry enable_reuse_port: true when the node advertises
//     feature-reuse-port (false otherwise, as in 3.0 mode, where it is left
//     unset rather than true).
//
// The version rule holds in both modes (pkg/version/compatibility.go,
// pkg/core/xds/metadata.go): ProxyInfo.KumaDpVersion is the node's
// version.kumaDp.version and KumaCpCompatible is false when it is another
// major or more than two minors from the CP's own version (3.0.0, or
// 2.14.3: 2.12.0–2.16.x pass), or a prerelease; unparsable and preview
// versions pass. kuma-cp only records it (the DataplaneInsight); so does
// this CP, and it logs the incompatible ones.
//
// Where 2.14 mode still differs from kuma-cp 2.14.3:
//   - The mesh's meshServices mode is not modelled: every mesh is taken to
//     be Exclusive, which 2.14's mesh-scoped zone proxies need (otherwise
//     kuma-cp sends them no zone listener at all).
//   - Legacy zone proxies are resources only (see "Legacy zone proxies and
//     the sidecar view" below): no kuma-dp process, no zone token, no
//     ZoneIngress availableServices; ZoneEgresses is the mesh-scoped set.
//   - Named MeshService ports: the ingress matches the port name
//     (…backend.http, the default; SetMeshServicePortNamed(mesh, false)
//     renders the number), as both releases do; 2.14.3's sidecars send the
//     number (…backend.80), which matches nothing. SidecarView names the
//     number, as a 2.14.3 sidecar would. Cluster names keep "http".
//   - Delta streams (feature-delta-grpc) are not ordered, where 2.14.3
//     orders both protocols; versions are one hash over every non-empty
//     type, where kuma-cp keeps a UUID per type, so a change re-sends the
//     unchanged types too (same resources, a new version).
//   - Envoy's version (kuma-dp 2.14 is built with Envoy 1.37) is not
//     checked.
//
// # Legacy zone proxies and the sidecar view
//
// What the migration from legacy zone proxies depends on, in both modes
// (3.0 removed legacy proxies; a test of them runs in 2.14 mode), checked
// against kuma-cp v2.14.3 (migration.go, sidecarview.go):
// SetLegacyZoneIngress/SetLegacyZoneEgress (a ZoneIngress's zone and
// advertised address, a ZoneEgress's address), SetMeshIdentity and
// SetMeshZoneAddress (per mesh, labelled with a zone), each with a delete.
// SidecarView(mesh, zone) is what a sidecar of mesh in another zone is
// sent, computed over the store and those resources as they were
// EgressPropagation ago (the same lag as ZoneEgresses; kuma-cp's MZA took
// 2.5–4.6 s to reach the other zone, plus 0.4–1.2 s to the sidecar):
//   - MeshExternalService "httpbin" port 80: the mesh's Ready ZoneEgress
//     listeners, or the legacy ZoneEgresses when there is none, never both
//     (resolveZoneEgresses, resolveLegacyZoneEgresses).
//   - MeshService "backend" port 80 of zone: the zone's MeshZoneAddresses,
//     or its legacy ZoneIngresses when it has none (fillRemoteMeshServices,
//     pkg/xds/topology/outbound.go).
//   - The SNI: the KRI format (sni.extsvc.…, sni.msvc.<mesh>.<zone>.backend.80)
//     only with a MeshIdentity, and toward an ingress only through an MZA
//     (meshroute/clusters.go, ZonesWithMeshScopedProxy); otherwise the hash
//     format of tls.SNIForResource (LegacySNI: "a<fnv64a>.backend.80.<mesh>.ms",
//     ".mes" for an external service), to legacy and mesh-scoped proxies
//     alike.
//   - Frozen: with a MeshIdentity, no Ready mesh-scoped egress and a legacy
//     ZoneEgress, kuma-cp skips the external service's cluster but builds
//     its endpoints, and every update fails ("inconsistent snapshot"): the
//     view keeps the last routes it could build (ingress too), since
//     FrozenSince. So a stopped mesh-scoped egress stays the sidecars'
//     egress while a legacy one exists.
//
// Where it still differs from kuma-cp 2.14.3: one pretend sidecar with
// one outbound of each kind; mesh mTLS is taken to be on (without it
// kuma-cp sends no cross-zone endpoints); MeshIdentity does not withhold
// an egress's listener (WithholdZoneListeners does) nor give SANs; an MZA
// or ZoneIngress of the sidecar's own zone is not excluded (the caller
// names the remote zone); a MeshExternalService without a port (which
// freezes a 2.14.3 sidecar too) is not modelled; the lag is fixed, where
// kuma-cp's varies; the MeshMultiZoneService SNI choice is not modelled.
// The view replays every change of the mesh on each call: meant for tests,
// not for a store with 100000 changes.
//
// # The Hang fault
//
// Faults.Hang ("hang" in JSON) models a kuma-cp stopped with SIGSTOP.
// The DP listener stays open and the kernel completes TCP handshakes into
// its backlog, but the server stops calling Accept (a connection the
// kernel handed over meanwhile is held unread); every connection's reads
// and writes block, so no TLS handshake completes and open connections
// get no bytes. A /bootstrap POST and a new gRPC stream hang rather than
// fail. Deadlines that pass meanwhile take effect when it is cleared,
// like timers of a resumed process, and everything carries on. Restart
// and Close still drop the connections. The admin API stays up (it is
// how a test clears the fault; a stopped kuma-cp's API would not answer).
//
// Where the lifecycle still differs from kuma-cp:
//   - One CP instance: proxyConnectedToAnotherCP (the latest
//     DataplaneInsight subscription of another instance keeping a
//     Dataplane) is not modelled, and neither are the "reconnected to this
//     instance" branch (unreachable on one instance) and the concurrent
//     re-registration retry ("attempt to concurently register deleted DPP
//     resource").
//   - No DataplaneInsights, no watchdog, no NACK backoff; the snapshot is
//     set once at connect (and on policy changes), not every refresh
//     interval, and the sidecars are not modelled: the propagation lag is
//     a fixed worst case, where kuma-cp's varies between about 0 and it.
//   - No garbage collection of offline Dataplanes
//     (runtime.universal.dataplaneCleanupAge, 72 h): a Dataplane whose
//     deregistration a restart dropped stays in the store.
//   - Dataplanes enter the store only through ADS registration: /bootstrap
//     without dataplaneResource is 404 and ADS without dataplane.resource
//     is refused, where kuma-cp would use a stored Dataplane. Stored
//     Dataplanes are not validated again, and no computed labels are added.
//   - kuma-cp refuses to delete a mesh that still has Dataplanes
//     (store.unsafeDelete false); DeleteMesh deletes them with it.
//   - The MeshIdentity workload-label validator is not modelled, nor the
//     SAN of a zone egress.
//   - A frozen (Hang) CP keeps its admin API and in-process callers
//     (SetFaults, Restart, …) working.
//
// Deliberate differences from kuma-cp:
//   - One RSA key (kid "1") is trusted for every mesh, like offline-issued
//     tokens in dpServer.authn.dpProxy.dpToken.validator.publicKeys, so a
//     token can be issued before its mesh exists. A token for another mesh
//     therefore fails on its Mesh claim rather than on its signature.
//   - Dataplanes are stored only as ADS registers them (see above):
//     /bootstrap without dataplaneResource is always 404, and ADS needs
//     dataplane.resource in the node metadata.
//   - xDS is fixed: per listener an SNI passthrough (tcp_proxy) to a
//     pretend MeshService "backend" (ingress, EDS; or Options.Services
//     of them) or MeshExternalService "httpbin" (egress, STATIC
//     127.0.0.1:8080), plus system_envoy_admin and
//     system_probe_readiness. No SDS is modelled (a MeshIdentity only
//     decides SidecarView, see "Legacy zone proxies and the sidecar
//     view"), and the public admin listener (networking.address !=
//     127.0.0.1) is not sent.
//   - Without caCert in the request, Envoy is told to trust this server's
//     CA (ca.pem), which is what kuma-cp's self-signed default amounts to.
//
// Admin API (plain HTTP, JSON) on Options.AdminAddr:
//
//	PUT    /meshes/{name}          201 created / 200 existed, body {}
//	DELETE /meshes/{name}          200 / 404
//	GET    /meshes                 {"items":[{"type":"Mesh","name":…}],"next":null,"total":n}
//	POST   /tokens/dataplane       {"mesh","name","workload","tags","type","validFor":"24h"} -> 200 text/plain JWT
//	GET    /proxies                [ProxyInfo…] ({"nodeId","connected","connectedAt","acked","listeners","version","protocol","kumaDpVersion","kumaCpCompatible"})
//	GET    /faults, PUT /faults    Faults as JSON, bootstrapDelay as "2s", {"hang":true} freezes the DP server
//	POST   /restart?down=2s        answers once the DP listener is back
//	GET    /bootstrap-requests     {"count":n,"dropped":d,"records":[BootstrapRecord…]} (body base64; the newest 1000, d older ones let go)
//	GET    /version                {"kuma":"3.0"|"2.14","version":"3.0.0"|"2.14.3","sotw":bool}
//	GET    /ready                  200 READY
//
// The lifecycle (times RFC3339Nano, durations as "300ms"):
//
//	GET    /lifecycle                               {"deregistrationDelay","cacheExpiration","egressPropagation"}
//	GET    /meshes/{mesh}/dataplanes                {"at","total","items":[DataplaneRecord…]}
//	GET    /meshes/{mesh}/dataplanes/{name}         DataplaneRecord {"mesh","name","labels","spec":{…},"listeners":[{"type","address","port","state","name"}],"creationTime","modificationTime","streamId"}; 404 when absent
//	GET    /meshes/{mesh}/dataplanes/{name}/timeline {"at","mesh","name","present","events":[{"at","kind":"upserted"|"deleted","spec","listeners","streamId","reason"}…]}
//	GET    /meshes/{mesh}/zone-egresses             {"at","asOf","egressPropagation","mesh","handedOut":[{"dataplane","address","port"}…],"raw":[…]}
//	GET    /meshes/{mesh}/zone-egresses/timeline    {"at","egressPropagation","mesh","changes":[{"at","effectiveAt","dataplane","kind","egresses":[…]}…]}
//	GET    /nodes/{nodeId}/stream                   NodeStreamInfo {"at","nodeId","activeStream","activeSince","connected","connectedAt","deregisteringSince","deregistrationAt","refusals","lastRefusalAt","accepted"}
//
// Legacy zone proxies and the sidecar view (migration_admin.go; bodies
// decoded strictly, 400 naming the field):
//
//	PUT    /zone-ingresses/{name}                   {"zone","address","port"}; DELETE
//	PUT    /zone-egresses/{name}                    {"address","port"}; DELETE
//	PUT    /meshes/{mesh}/meshidentity              no body; DELETE
//	PUT    /meshes/{mesh}/meshzoneaddresses/{name}  {"zone","address","port"}; DELETE
//	PUT    /meshes/{mesh}/meshservice-port          {"named": true|false}
//	GET    /meshes/{mesh}/sidecar?zone=default      SidecarView {"at","asOf","mesh","zone","meshIdentity","egress":[{"via","name","address","port","sni"}…],"ingress":[…],"frozen","frozenSince"}
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
// pkg/kuma/kumasock and the bootstrap's workdir metadata:
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
