package bootstraprewrite

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
)

// service rewrites one GrpcService if it talks to the control plane, and
// reports whether it did.
func (rw *rewriter) service(s *corev3.GrpcService) bool {
	switch t := s.GetTargetSpecifier().(type) {
	case *corev3.GrpcService_EnvoyGrpc_:
		if rw.cluster == "" || t.EnvoyGrpc.GetClusterName() != rw.cluster {
			return false
		}
		if len(s.InitialMetadata) == 0 {
			return false
		}
	case *corev3.GrpcService_GoogleGrpc_:
		if rw.target == "" || t.GoogleGrpc.GetTargetUri() != rw.target {
			return false
		}
		eg := &corev3.GrpcService_EnvoyGrpc{ClusterName: ClusterName}
		if n := rw.up.MaxReceiveMessageLength; n > 0 && n <= math.MaxUint32 {
			eg.MaxReceiveMessageLength = wrapperspb.UInt32(uint32(n))
		}
		s.TargetSpecifier = &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: eg}
	default:
		return false
	}
	for _, h := range s.InitialMetadata {
		if strings.EqualFold(h.GetKey(), "authorization") {
			rw.tokens = append(rw.tokens, h.GetValue())
		}
	}
	s.InitialMetadata = nil
	return true
}

// usedBy reports whether the api config source goes to the relay.
func (rw *rewriter) usedBy(src *corev3.ApiConfigSource) bool {
	for _, s := range src.GetGrpcServices() {
		if s.GetEnvoyGrpc().GetClusterName() == rw.clusterName() {
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

// The relay cluster's load assignment, in encoding/json's key order as
// the rest of the bootstrap is written.
type loadAssignment struct {
	ClusterName string           `json:"clusterName"`
	Endpoints   []localityPoints `json:"endpoints"`
}

type localityPoints struct {
	LbEndpoints []lbEndpoint `json:"lbEndpoints"`
}

type lbEndpoint struct {
	Endpoint struct {
		Address struct {
			Pipe struct {
				Path string `json:"path"`
			} `json:"pipe"`
		} `json:"address"`
	} `json:"endpoint"`
}

// relayEndpoint is the load assignment of a cluster on the relay socket.
func (rw *rewriter) relayEndpoint(name string) json.RawMessage {
	var lb lbEndpoint
	lb.Endpoint.Address.Pipe.Path = rw.socket
	return mustJSON(loadAssignment{ClusterName: name, Endpoints: []localityPoints{{LbEndpoints: []lbEndpoint{lb}}}})
}

// Reaching the control plane over TCP and TLS: meaningless on a Unix socket
// (TCP keepalive options would even fail there).
var tcpOnlyClusterFields = []string{
	"transport_socket", "transport_socket_matches", "dns_lookup_family", "dns_refresh_rate",
	"dns_failure_refresh_rate", "respect_dns_ttl", "dns_resolvers", "typed_dns_resolver_config",
	"upstream_connection_options", "upstream_bind_config", "use_tcp_for_dns_lookups",
}

func (rw *rewriter) replaceCluster() error {
	static, clusters, i := rw.staticCluster(rw.cluster)
	if i < 0 {
		return fmt.Errorf("static cluster %q named by ads_config is missing", rw.cluster)
	}
	c := clusters[i]
	for _, f := range tcpOnlyClusterFields {
		c.Delete(f)
	}
	c.Delete("type")
	c.Set("type", mustJSON("STATIC"))
	c.Delete("load_assignment")
	c.Set("load_assignment", rw.relayEndpoint(rw.cluster))
	rw.setClusters(static, clusters)
	return nil
}

// http2Only: the relay serves gRPC, so Envoy speaks HTTP/2 to it.
const http2Only = `{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions":{"@type":"type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions","explicitHttpConfig":{"http2ProtocolOptions":{}}}}`

func (rw *rewriter) addCluster() error {
	static, clusters, i := rw.staticCluster(ClusterName)
	if i >= 0 {
		return fmt.Errorf("a static cluster %q exists but ads_config does not use it", ClusterName)
	}
	if static == nil {
		static = &bootstrapdoc.Object{}
	}
	c := &bootstrapdoc.Object{}
	c.Set("connect_timeout", mustJSON("1s"))
	c.Set("load_assignment", rw.relayEndpoint(ClusterName))
	c.Set("name", mustJSON(ClusterName))
	c.Set("type", mustJSON("STATIC"))
	c.Set("typed_extension_protocol_options", json.RawMessage(http2Only))
	rw.setClusters(static, append(clusters, c))
	return nil
}

// staticCluster finds the static cluster called name: static_resources,
// its clusters, and name's index among them (-1 if it is not there).
func (rw *rewriter) staticCluster(name string) (*bootstrapdoc.Object, []*bootstrapdoc.Object, int) {
	static := rw.root.Object("static_resources")
	clusters := static.ObjectsIn("clusters")
	for i, c := range clusters {
		if c.String("name") == name {
			return static, clusters, i
		}
	}
	return static, clusters, -1
}

func (rw *rewriter) setClusters(static *bootstrapdoc.Object, clusters []*bootstrapdoc.Object) {
	list := make([]json.RawMessage, len(clusters))
	for i, c := range clusters {
		list[i] = c.JSON()
	}
	static.Set("clusters", mustJSON(list))
	rw.root.Set("static_resources", static.JSON())
}

// mustJSON marshals what cannot fail to marshal: strings and the structs
// above.
func mustJSON(v any) json.RawMessage {
	js, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return js
}
