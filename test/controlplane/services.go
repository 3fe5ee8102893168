package controlplane

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// EndpointsPerService is how many endpoints each pretend MeshService of
// Options.Services has in its ClusterLoadAssignment.
const EndpointsPerService = 3

// ServiceName is the name of the i-th pretend MeshService (0-based) that
// Options.Services adds: the service at 0 is "backend", the one a zone
// ingress always carries; the others are "svc-00001" and on.
func ServiceName(i int) string {
	if i == 0 {
		return "backend"
	}
	return fmt.Sprintf("svc-%05d", i)
}

// ServiceSNI is the SNI a client names to reach the pretend MeshService
// name (port "http") of mesh through a zone ingress; ServiceSNI(mesh,
// "backend") is DestinationSNI(mesh, "ingress").
func ServiceSNI(mesh, name string) string {
	return "sni.msvc." + mesh + ".default." + name + ".http"
}

// serviceCluster is the cluster kuma-cp names after the MeshService's KRI.
func serviceCluster(mesh, name string) string {
	return fmt.Sprintf("kri_msvc_%s_default__%s_http", mesh, name)
}

// edsCluster is a MeshService's cluster on a zone ingress: EDS over ADS.
func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		ConnectTimeout:       durationpb.New(5 * time.Second),
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}},
	}
}

// sniChain is the filter chain of a zone listener for one destination:
// a TLS ClientHello naming sni goes to cluster, bytes untouched.
func sniChain(sni, cluster string) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{sni}, TransportProtocol: "tls"},
		Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(&tcpproxyv3.TcpProxy{
				StatPrefix:       cluster,
				ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster},
			})},
		}},
	}
}

// serviceEndpoints is the ClusterLoadAssignment of the i-th pretend
// MeshService: EndpointsPerService endpoints in the local zone, each with
// service, zone and protocol tags in its envoy.lb metadata. Every address is loopback
// and nothing dials them (the stand-in never connects upstream); the
// ports differ per endpoint, as the workloads' inbounds would.
func serviceEndpoints(mesh string, i int) *endpointv3.ClusterLoadAssignment {
	name := ServiceName(i)
	cluster := serviceCluster(mesh, name)
	lbs := make([]*endpointv3.LbEndpoint, 0, EndpointsPerService)
	for j := 0; j < EndpointsPerService; j++ {
		port := uint32(10000 + (i*EndpointsPerService+j)%50000)
		md, err := structpb.NewStruct(map[string]any{
			"kuma.io/service":  name + "_http",
			"kuma.io/zone":     "default",
			"kuma.io/protocol": "tcp",
		})
		if err != nil {
			panic(err) // only strings: cannot fail
		}
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(destinationAddress, port)}},
			Metadata:       &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb": md}},
		})
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: cluster,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:    &corev3.Locality{Zone: "default"},
			LbEndpoints: lbs,
		}},
	}
}

// servicesNote is the start line's mention of Options.Services; nothing
// for the default.
func servicesNote(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" ingressServices=%d", n)
}
