package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Upstream of the fixed destinations the test CP pretends exist.
const (
	destinationAddress = "127.0.0.1"
	destinationPort    = 8080
)

var errReadinessPort = errors.New("ReadinessPort has to be in (0, 65535] range")

// validator is what every generated Envoy resource implements.
type validator interface{ ValidateAll() error }

// buildSnapshot generates the xDS for a zone proxy Dataplane: one
// listener per networking.listeners[] entry (SNI passthrough via
// tcp_proxy), the clusters they use, and the admin/readiness clusters.
// Ingress pretends a local MeshService "backend" (port "http") exists and
// egress a MeshExternalService "httpbin" on port 80. With services > 1 an
// ingress carries that many MeshServices (Options.Services): "backend"
// and services-1 more, each an EDS cluster with its ClusterLoadAssignment
// and a filter chain for its SNI on every ZoneIngress listener.
func buildSnapshot(dp *dataplane, node *corev3.Node, pol ProxyPolicies, services int, kuma, backendPort string) (*cachev3.Snapshot, error) {
	fields := node.GetMetadata().GetFields()
	adminPort, err := metaPort(node, "dataplane.admin.port")
	if err != nil {
		return nil, err
	}
	readinessPort, err := metaPort(node, "dataplane.readinessReporter.port")
	if err != nil {
		return nil, err
	}
	reusePort := false
	for _, f := range fields["features"].GetListValue().GetValues() {
		if f.GetStringValue() == "feature-reuse-port" {
			reusePort = true
		}
	}

	var listeners, clusters, endpoints []types.Resource
	seenCluster := map[string]bool{}
	addCluster := func(c *clusterv3.Cluster) {
		if !seenCluster[c.Name] {
			seenCluster[c.Name] = true
			clusters = append(clusters, c)
		}
	}

	for _, l := range pol.zoneListeners(dp) {
		var name, sni, clusterName string
		var more []*listenerv3.FilterChain // the ingress's other MeshServices
		switch l.Type {
		case listenerZoneIngress:
			name = "self_zoneingress_dp_" + l.sectionName()
			sni = ingressBackendSNI(dp.Mesh, backendPort)
			clusterName = serviceCluster(dp.Mesh, "backend")
			if !seenCluster[clusterName] {
				endpoints = append(endpoints, singleEndpoint(clusterName, socketAddress(destinationAddress, destinationPort)))
			}
			addCluster(edsCluster(clusterName))
			for i := 1; i < services; i++ {
				svc := serviceCluster(dp.Mesh, ServiceName(i))
				if !seenCluster[svc] {
					endpoints = append(endpoints, serviceEndpoints(dp.Mesh, i))
					addCluster(edsCluster(svc))
				}
				more = append(more, sniChain(ServiceSNI(dp.Mesh, ServiceName(i)), svc))
			}
		case listenerZoneEgress:
			name = "self_zoneegress_dp_" + l.sectionName()
			sni = DestinationSNI(dp.Mesh, "egress")
			clusterName = fmt.Sprintf("kri_extsvc_%s_default__httpbin_80", dp.Mesh)
			addCluster(&clusterv3.Cluster{
				Name:                 clusterName,
				ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
				ConnectTimeout:       durationpb.New(5 * time.Second),
				LoadAssignment:       singleEndpoint(clusterName, socketAddress(destinationAddress, destinationPort)),
			})
		default:
			continue
		}
		lis := &listenerv3.Listener{
			Name:    name,
			Address: socketAddress(l.Address, l.Port),
			// kuma-cp names the listener's stats after it (StatPrefix(listenerName)).
			StatPrefix:       name,
			TrafficDirection: corev3.TrafficDirection_INBOUND,
			ListenerFilters: []*listenerv3.ListenerFilter{{
				Name:       "envoy.filters.listener.tls_inspector",
				ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})},
			}},
			FilterChains: append([]*listenerv3.FilterChain{sniChain(sni, clusterName)}, more...),
		}
		if !reusePort {
			// kuma-cp turns reuse_port off for proxies without feature-reuse-port.
			lis.EnableReusePort = wrapperspb.Bool(false)
		} else if kuma == Kuma214 {
			// 2.14.3 spells it out (InboundListener(…, HasFeature(FeatureReusePort))).
			lis.EnableReusePort = wrapperspb.Bool(true)
		}
		listeners = append(listeners, lis)
	}
	obsListeners, obsClusters, err := pol.observabilityResources(dp, node, listeners, reusePort)
	if err != nil {
		return nil, err
	}
	listeners = append(listeners, obsListeners...)
	for _, c := range obsClusters {
		addCluster(c)
	}

	// kuma's AdminProxyGenerator runs whenever an admin port is set, and
	// fails the whole xDS generation without a readiness port.
	if adminPort != 0 {
		if readinessPort == 0 || readinessPort > 65535 {
			return nil, errReadinessPort
		}
		adminAddr := fields["dataplane.admin.address"].GetStringValue()
		probeHost := "127.0.0.1"
		if ip := net.ParseIP(adminAddr); ip != nil && ip.To4() == nil {
			probeHost = "::1"
		}
		var adminTarget *corev3.Address
		if sock := fields["dataplane.admin.socketPath"].GetStringValue(); sock != "" {
			adminTarget = &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: sock}}}
		} else {
			switch adminAddr {
			case "", "0.0.0.0":
				adminAddr = "127.0.0.1"
			case "::":
				adminAddr = "::1"
			case "127.0.0.1", "::1":
			default:
				return nil, fmt.Errorf("invalid admin address %q", adminAddr)
			}
			adminTarget = socketAddress(adminAddr, adminPort)
		}
		addCluster(&clusterv3.Cluster{
			Name:                 "system_envoy_admin",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(5 * time.Second),
			LoadAssignment:       singleEndpoint("system_envoy_admin", adminTarget),
		})
		addCluster(&clusterv3.Cluster{
			Name:                 "system_probe_readiness",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(5 * time.Second),
			LoadAssignment:       singleEndpoint("system_probe_readiness", socketAddress(probeHost, readinessPort)),
		})
	}

	all := map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: listeners,
		resourcev3.ClusterType:  clusters,
		resourcev3.EndpointType: endpoints,
	}
	h := sha256.New()
	for _, typ := range []resourcev3.Type{resourcev3.ListenerType, resourcev3.ClusterType, resourcev3.EndpointType} {
		for _, r := range all[typ] {
			if err := r.(validator).ValidateAll(); err != nil {
				return nil, fmt.Errorf("generated %s is invalid: %w", shortType(typ), err)
			}
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
			if err != nil {
				return nil, err
			}
			h.Write(b)
		}
	}
	snap, err := cachev3.NewSnapshot(hex.EncodeToString(h.Sum(nil))[:16], all)
	if err != nil {
		return nil, err
	}
	if err := snap.Consistent(); err != nil {
		return nil, err
	}
	return snap, nil
}
