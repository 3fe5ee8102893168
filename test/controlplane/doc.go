// Package controlplane is a stand-in for kuma-cp's DP server: the
// /bootstrap endpoint and delta ADS (plus HDS) on one TLS port, strict
// where the real CP is strict (docs: kuma-contract.md, kuma-live.md), so
// the zoneproxy agent can be tested without a real control plane.
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
//	GET    /bootstrap-requests     {"count":n,"records":[BootstrapRecord…]} (body base64)
//	GET    /ready                  200 READY
package controlplane
