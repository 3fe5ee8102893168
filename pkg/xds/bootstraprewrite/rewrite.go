// Package bootstraprewrite points the Envoy bootstrap that the control
// plane generated at the agent's xDS relay: the ADS gRPC service (and
// whatever else talks to the control plane, such as HDS) becomes an
// envoy_grpc cluster on a Unix socket, without TLS and without the token.
// Everything else is kept as it came. It returns what the relay needs to
// reach the control plane itself (cpdial.Target), and the admin member, so
// that the document is parsed once. It knows nothing of the relay or the
// cache.
package bootstraprewrite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// ClusterName is the control plane's name for its ADS cluster; the relay
// cluster keeps it so that Envoy's stats and HDS keep their names.
const ClusterName = "system_ads"

// maxSocketPath is what fits in sockaddr_un.sun_path with its NUL.
const maxSocketPath = 107

// Result is the rewritten bootstrap and the control plane it came for.
type Result struct {
	// JSON is the rewritten bootstrap, which Envoy reads as YAML (JSON is
	// YAML too). No token anywhere in it.
	JSON []byte
	// Admin is the bootstrap's admin member as JSON, nil if it has none:
	// where Envoy's admin API listens, without parsing JSON again.
	Admin    []byte
	Upstream cpdial.Target
}

// Rewrite points doc's ADS (and HDS) at socketPath. Errors say what part of
// the control plane's bootstrap is missing or unexpected.
func Rewrite(doc []byte, socketPath string) (*Result, error) {
	if socketPath == "" || !strings.HasPrefix(socketPath, "/") {
		return nil, fmt.Errorf("relay socket path %q must be absolute", socketPath)
	}
	if len(socketPath) > maxSocketPath {
		return nil, fmt.Errorf("relay socket path %s is %d bytes, longer than a Unix socket allows (%d): use a shorter %s", socketPath, len(socketPath), maxSocketPath, config.KeyWorkDir.Flag())
	}
	root, err := parse(doc)
	if err != nil {
		return nil, fmt.Errorf("the control plane's bootstrap: %w", err)
	}
	ads := obj(root, "dynamicResources", "adsConfig")
	services := list(ads, "grpcServices")
	if ads == nil || len(services) != 1 {
		return nil, errors.New("the control plane's bootstrap has no dynamic_resources.ads_config with one gRPC service")
	}
	adsService, ok := services[0].(object)
	if !ok {
		return nil, errors.New("the control plane's bootstrap: ads_config.grpc_services[0] is not an object")
	}
	rw := &rewriter{root: root, socket: socketPath}
	if err := rw.upstreamFrom(adsService); err != nil {
		return nil, fmt.Errorf("the control plane's bootstrap: %w", err)
	}
	if err := rw.apply(); err != nil {
		return nil, fmt.Errorf("the control plane's bootstrap: %w", err)
	}
	out, err := render(root)
	if err != nil {
		return nil, fmt.Errorf("rendering the rewritten bootstrap: %w", err)
	}
	for _, tok := range rw.tokens {
		if len(tok) > 0 && bytes.Contains(out, []byte(tok)) {
			return nil, errors.New("the rewritten bootstrap would still hold the dataplane token; refusing to write it")
		}
	}
	rw.up.HDS = rw.usedBy(obj(root, "hdsConfig"))
	res := &Result{JSON: out, Upstream: rw.up}
	if admin := get(root, "admin"); admin != nil {
		if res.Admin, err = json.Marshal(admin); err != nil {
			return nil, fmt.Errorf("rendering the bootstrap's admin: %w", err)
		}
	}
	return res, nil
}

type rewriter struct {
	root    object
	socket  string
	up      cpdial.Target
	cluster string // the control plane's ADS cluster (envoy_grpc), "" for google_grpc
	target  string // google_grpc target_uri of the control plane
	tokens  []string
}

// apply rewrites every gRPC service bound for the control plane and the
// ADS cluster itself.
func (rw *rewriter) apply() error {
	var errs []error
	walk(rw.root, func(m object) {
		if get(m, "envoyGrpc") == nil && get(m, "googleGrpc") == nil {
			return
		}
		if err := rw.service(m); err != nil {
			errs = append(errs, err)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if rw.cluster != "" {
		return rw.replaceCluster()
	}
	return rw.addCluster()
}

// service rewrites one GrpcService if it talks to the control plane.
func (rw *rewriter) service(m object) error {
	if eg, ok := get(m, "envoyGrpc").(object); ok {
		if rw.cluster == "" || str(eg, "clusterName") != rw.cluster {
			return nil
		}
	} else {
		gg, _ := get(m, "googleGrpc").(object)
		if rw.target == "" || str(gg, "targetUri") != rw.target {
			return nil
		}
		del(m, "googleGrpc")
		eg := object{"clusterName": ClusterName}
		if rw.up.MaxReceiveMessageLength > 0 {
			eg["maxReceiveMessageLength"] = rw.up.MaxReceiveMessageLength
		}
		m["envoyGrpc"] = eg
	}
	for _, h := range list(m, "initialMetadata") {
		if ho, ok := h.(object); ok && strings.EqualFold(str(ho, "key"), "authorization") {
			rw.tokens = append(rw.tokens, str(ho, "value"))
		}
	}
	del(m, "initialMetadata")
	return nil
}

// usedBy reports whether the api config source m goes to the relay.
func (rw *rewriter) usedBy(m object) bool {
	for _, s := range list(m, "grpcServices") {
		if so, ok := s.(object); ok && str(obj(so, "envoyGrpc"), "clusterName") == rw.clusterName() {
			return true
		}
	}
	return false
}

func (rw *rewriter) clusterName() string {
	if rw.cluster != "" {
		return rw.cluster
	}
	return ClusterName
}

// relayEndpoint is the load assignment of a cluster on the relay socket.
func (rw *rewriter) relayEndpoint(name string) object {
	return object{
		"clusterName": name,
		"endpoints": []any{object{"lbEndpoints": []any{object{
			"endpoint": object{"address": object{"pipe": object{"path": rw.socket}}},
		}}}},
	}
}

// Reaching the control plane over TCP and TLS: meaningless on a Unix socket
// (TCP keepalive options would even fail there).
var tcpOnlyClusterFields = []string{
	"transportSocket", "transportSocketMatches", "dnsLookupFamily", "dnsRefreshRate",
	"dnsFailureRefreshRate", "respectDnsTtl", "dnsResolvers", "typedDnsResolverConfig",
	"upstreamConnectionOptions", "upstreamBindConfig", "useTcpForDnsLookups",
}

func (rw *rewriter) replaceCluster() error {
	c := rw.staticCluster(rw.cluster)
	if c == nil {
		return fmt.Errorf("static cluster %q named by ads_config is missing", rw.cluster)
	}
	for _, f := range tcpOnlyClusterFields {
		del(c, f)
	}
	del(c, "type")
	c["type"] = "STATIC"
	del(c, "loadAssignment")
	c["loadAssignment"] = rw.relayEndpoint(rw.cluster)
	return nil
}

func (rw *rewriter) addCluster() error {
	if rw.staticCluster(ClusterName) != nil {
		return fmt.Errorf("a static cluster %q exists but ads_config does not use it", ClusterName)
	}
	static := obj(rw.root, "staticResources")
	if static == nil {
		static = object{}
		rw.root["staticResources"] = static
	}
	k := key(static, "clusters")
	clusters, _ := static[k].([]any)
	static[k] = append(clusters, object{
		"name":           ClusterName,
		"type":           "STATIC",
		"connectTimeout": "1s",
		"loadAssignment": rw.relayEndpoint(ClusterName),
		"typedExtensionProtocolOptions": object{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": object{
				"@type":              "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
				"explicitHttpConfig": object{"http2ProtocolOptions": object{}},
			},
		},
	})
	return nil
}

func (rw *rewriter) staticCluster(name string) object {
	for _, c := range list(obj(rw.root, "staticResources"), "clusters") {
		if co, ok := c.(object); ok && str(co, "name") == name {
			return co
		}
	}
	return nil
}
