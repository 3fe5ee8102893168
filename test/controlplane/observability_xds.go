package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filealv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	grpcstatsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
)

// Names kuma-cp gives the observability resources of a zone proxy
// (kuma-observability.md §2.2).
const (
	dynconfListenerName      = "system_dynamicconfig"
	meshMetricDynconfName    = "meshmetric"
	meshMetricDynconfPath    = "/meshmetric"
	prometheusNamePrefix     = "system_meshmetric_prometheus_"
	otelNamePrefix           = "system_meshmetric_otel_"
	meshMetricStatsPath      = "/meshmetric"
	observabilityConnTimeout = 5 * time.Second
)

// kumaTCPFormat is meshaccesslog's defaultNetworkAccessLogFormat; kuma-cp
// uses it on every zone-listener chain, HTTP ones included.
const kumaTCPFormat = `[%START_TIME%] %RESPONSE_FLAGS% %KUMA_MESH% %KUMA_SOURCE_ADDRESS_WITHOUT_PORT%(%KUMA_SOURCE_SERVICE%)->%UPSTREAM_HOST%(%KUMA_DESTINATION_SERVICE%) took %DURATION%ms, sent %BYTES_SENT% bytes, received: %BYTES_RECEIVED% bytes`

// zoneListeners are the Dataplane's listeners, or none while withheld.
func (p ProxyPolicies) zoneListeners(dp *dataplane) []dpListener {
	if p.WithholdZoneListeners || dp.Networking == nil {
		return nil
	}
	return dp.Networking.Listeners
}

// observabilityResources adds the MeshAccessLog loggers to the zone
// listeners (in place) and returns the MeshMetric listeners and clusters.
func (p ProxyPolicies) observabilityResources(dp *dataplane, node *corev3.Node, zone []types.Resource, reusePort bool) (listeners []types.Resource, clusters []*clusterv3.Cluster, err error) {
	workdir := node.GetMetadata().GetFields()["workdir"].GetStringValue()
	if err := p.addAccessLogs(dp, workdir, zone); err != nil {
		return nil, nil, err
	}
	mm := p.mergedMeshMetric()
	if mm == nil {
		return nil, nil, nil
	}
	address := ""
	if dp.Networking != nil {
		address = dp.Networking.Address
	}
	var dpBackends []dynconfBackend
	havePrometheus := false
	for _, b := range mm.Backends {
		switch {
		case b.Prometheus != nil:
			if net.ParseIP(address) == nil {
				return nil, nil, fmt.Errorf("MeshMetric Prometheus backend needs networking.address to be an IP, got %q", address)
			}
			name := prometheusNamePrefix + b.Prometheus.ClientID
			clusters = append(clusters, &clusterv3.Cluster{
				Name:                 name,
				ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
				ConnectTimeout:       durationpb.New(observabilityConnTimeout),
				LoadAssignment:       singleEndpoint(name, pipeAddress(kumasock.MetricsHijacker(workdir, dp.Name, dp.Mesh))),
			})
			route := &routev3.Route{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: b.Prometheus.Path}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name},
					PrefixRewrite:    meshMetricStatsPath,
				}},
			}
			lis := &listenerv3.Listener{
				Name:             name,
				Address:          socketAddress(address, b.Prometheus.Port),
				TrafficDirection: corev3.TrafficDirection_INBOUND,
				EnableReusePort:  wrapperspb.Bool(reusePort),
				FilterChains:     []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmFilter(name, []*routev3.Route{route}, nil, 0)}}},
			}
			listeners = append(listeners, lis)
			havePrometheus = true
		case b.OpenTelemetry != nil:
			o := b.OpenTelemetry
			name := otelNamePrefix + o.Name
			socket := kumasock.OTel(workdir, o.Name)
			c := &clusterv3.Cluster{
				Name:                          name,
				ConnectTimeout:                durationpb.New(observabilityConnTimeout),
				LoadAssignment:                singleEndpoint(name, socketAddress(o.Endpoint.Address, o.Endpoint.Port)),
				TypedExtensionProtocolOptions: http2Options(),
			}
			if net.ParseIP(o.Endpoint.Address) != nil {
				c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
			} else {
				c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
			}
			clusters = append(clusters, c)
			route := &routev3.Route{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}},
			}
			grpcStats := &hcmv3.HttpFilter{
				Name: "envoy.filters.http.grpc_stats",
				ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: detAny(&grpcstatsv3.FilterConfig{
					EmitFilterState:        true,
					PerMethodStatSpecifier: &grpcstatsv3.FilterConfig_StatsForAllMethods{StatsForAllMethods: wrapperspb.Bool(true)},
				})},
			}
			listeners = append(listeners, &listenerv3.Listener{
				Name:         name,
				Address:      pipeAddress(socket),
				FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmFilter(name, []*routev3.Route{route}, grpcStats, 0)}}},
			})
			backendName := o.Name
			dpBackends = append(dpBackends, dynconfBackend{Type: "OpenTelemetry", Name: &backendName,
				OpenTelemetry: &dynconfOTel{Endpoint: socket, RefreshInterval: refreshIntervalString(o.RefreshInterval)}})
		}
	}
	if havePrometheus {
		dpBackends = append([]dynconfBackend{{Type: "Prometheus"}}, dpBackends...)
	}
	body, err := json.Marshal(dynconfMeshMetric{Observability: dynconfObservability{Metrics: dynconfMetrics{
		Backends:    dpBackends,
		Sidecar:     mm.Sidecar,
		ExtraLabels: extraLabels(dp),
	}}})
	if err != nil {
		return nil, nil, err
	}
	listeners = append(listeners, dynconfListener(workdir, map[string][]byte{meshMetricDynconfName: body}))
	return listeners, clusters, nil
}

// The /meshmetric body (kuma's dpapi.MeshMetricDpConfig).
type dynconfMeshMetric struct {
	Observability dynconfObservability `json:"observability"`
}

type dynconfObservability struct {
	Metrics dynconfMetrics `json:"metrics"`
}

type dynconfMetrics struct {
	Applications []struct{}        `json:"applications"` // always null: dropped for zone proxies
	Backends     []dynconfBackend  `json:"backends"`
	Sidecar      *MetricsSidecar   `json:"sidecar,omitempty"`
	ExtraLabels  map[string]string `json:"extraLabels"`
}

type dynconfBackend struct {
	Type          string       `json:"type"`
	Name          *string      `json:"name"`
	OpenTelemetry *dynconfOTel `json:"openTelemetry,omitempty"`
}

type dynconfOTel struct {
	Endpoint        string `json:"endpoint"`
	RefreshInterval string `json:"refreshInterval"`
}

// extraLabels are mesh, zone (label kuma.io/zone, "default" without it) and
// kuma.proxy_role from the kinds of zone listeners.
func extraLabels(dp *dataplane) map[string]string {
	zone := dp.Labels["kuma.io/zone"]
	if zone == "" {
		zone = "default"
	}
	ingress, egress := false, false
	if dp.Networking != nil {
		for _, l := range dp.Networking.Listeners {
			ingress = ingress || l.Type == listenerZoneIngress
			egress = egress || l.Type == listenerZoneEgress
		}
	}
	role := "sidecar"
	switch {
	case ingress && egress:
		role = "zone-proxy"
	case ingress:
		role = "zone-ingress"
	case egress:
		role = "zone-egress"
	}
	return map[string]string{"mesh": dp.Mesh, "zone": zone, "kuma.proxy_role": role}
}

// dynconfListener is kuma's dynconf listener: per config N at /N, a 304
// route when If-None-Match carries the body's hash, else a 200 with the
// body and an Etag (kuma's pkg/xds/dynconf).
func dynconfListener(workdir string, configs map[string][]byte) *listenerv3.Listener {
	var routes []*routev3.Route
	maxBody := 0
	for _, name := range sortedByteKeys(configs) {
		body := configs[name]
		sum := sha256.Sum256(body)
		etag := hex.EncodeToString(sum[:])
		path := "/" + name
		routes = append(routes,
			&routev3.Route{
				Name: dynconfListenerName + "_" + name + "_not_modified",
				Match: &routev3.RouteMatch{
					PathSpecifier: &routev3.RouteMatch_Path{Path: path},
					Headers: []*routev3.HeaderMatcher{{
						Name: "If-None-Match",
						HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
							MatchPattern: &matcherv3.StringMatcher_Exact{Exact: etag},
						}},
					}},
				},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 304}},
			},
			&routev3.Route{
				Name:  dynconfListenerName + "_" + name,
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: path}},
				ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
					Header: &corev3.HeaderValue{Key: "Etag", Value: etag},
				}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
					Status: 200,
					Body:   &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: string(body)}},
				}},
			},
		)
		maxBody = max(maxBody, len(body))
	}
	return &listenerv3.Listener{
		Name:         dynconfListenerName,
		Address:      pipeAddress(kumasock.DynamicConfig(workdir)),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmFilter(dynconfListenerName, routes, nil, uint32(maxBody))}}},
	}
}

func sortedByteKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hcmFilter is an HTTP connection manager with one "*" virtual host named
// after the listener. With maxDirectBody > 0 the routes are direct
// responses up to that size; otherwise they route to clusters with
// validate_clusters off, as kuma-cp's static endpoints do.
func hcmFilter(name string, routes []*routev3.Route, extra *hcmv3.HttpFilter, maxDirectBody uint32) *listenerv3.Filter {
	rc := &routev3.RouteConfiguration{
		VirtualHosts: []*routev3.VirtualHost{{Name: name, Domains: []string{"*"}, Routes: routes}},
	}
	if maxDirectBody > 0 {
		rc.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(maxDirectBody)
	} else {
		rc.ValidateClusters = wrapperspb.Bool(false)
	}
	var filters []*hcmv3.HttpFilter
	if extra != nil {
		filters = append(filters, extra)
	}
	filters = append(filters, &hcmv3.HttpFilter{
		Name:       "envoy.filters.http.router",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: detAny(&routerv3.Router{})},
	})
	return &listenerv3.Filter{
		Name: "envoy.filters.network.http_connection_manager",
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: detAny(&hcmv3.HttpConnectionManager{
			StatPrefix:     sanitizeStatPrefix(name),
			CodecType:      hcmv3.HttpConnectionManager_AUTO,
			HttpFilters:    filters,
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
		})},
	}
}

func sanitizeStatPrefix(s string) string {
	return strings.NewReplacer(":", "_", ".", "_").Replace(s)
}

func pipeAddress(path string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: path}}}
}

// addAccessLogs puts every MeshAccessLog backend into every filter chain of
// the zone listeners, in tcp_proxy and HCM alike, and makes tcp_proxy log
// once it is connected (meshaccesslog's applyToZoneProxyListeners).
func (p ProxyPolicies) addAccessLogs(dp *dataplane, workdir string, zone []types.Resource) error {
	mals := p.accessLogsInOrder()
	if len(mals) == 0 {
		return nil
	}
	source := ""
	if dp.Networking != nil {
		source = dp.Networking.Address
	}
	vars := strings.NewReplacer(
		"%KUMA_SOURCE_ADDRESS%", net.JoinHostPort(source, "0"),
		"%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%", source,
		"%KUMA_SOURCE_SERVICE%", "unknown",
		"%KUMA_DESTINATION_SERVICE%", "unknown",
		"%KUMA_MESH%", dp.Mesh,
		"%KUMA_TRAFFIC_DIRECTION%", "INBOUND",
		"%KUMA_ZONE%", extraLabels(dp)["zone"],
		"%KUMA_WORKLOAD%", "",
	)
	fifo := kumasock.AccessLog(workdir, dp.Name, dp.Mesh)
	var loggers []*accesslogv3.AccessLog
	for _, mal := range mals {
		for _, b := range mal.Backends {
			al, err := accessLogFor(b, fifo, vars)
			if err != nil {
				return err
			}
			loggers = append(loggers, al)
		}
	}
	for _, r := range zone {
		lis := r.(*listenerv3.Listener)
		for _, fc := range lis.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var updated *anypb.Any
				msg, err := f.GetTypedConfig().UnmarshalNew()
				if err != nil {
					return err
				}
				switch m := msg.(type) {
				case *tcpproxyv3.TcpProxy:
					m.AccessLog = append(m.AccessLog, loggers...)
					if m.AccessLogOptions == nil {
						m.AccessLogOptions = &tcpproxyv3.TcpProxy_TcpAccessLogOptions{}
					}
					m.AccessLogOptions.FlushAccessLogOnConnected = true
					updated = detAny(m)
				case *hcmv3.HttpConnectionManager:
					m.AccessLog = append(m.AccessLog, loggers...)
					updated = detAny(m)
				default:
					continue
				}
				f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: updated}
			}
		}
	}
	return nil
}

func accessLogFor(b AccessLogBackend, fifo string, vars *strings.Replacer) (*accesslogv3.AccessLog, error) {
	var sfs *corev3.SubstitutionFormatString
	path := fifo
	switch {
	case b.TCP != nil:
		fields := map[string]*structpb.Value{"address": structpb.NewStringValue(b.TCP.Address)}
		f := b.TCP.Format
		switch {
		case f == nil:
			fields["message"] = structpb.NewStringValue(vars.Replace(kumaTCPFormat + "\n"))
		case f.Type == "Plain":
			fields["message"] = structpb.NewStringValue(vars.Replace(f.Plain + "\n"))
		default:
			fields["message"] = structpb.NewStructValue(jsonFields(f.JSON, vars))
		}
		sfs = &corev3.SubstitutionFormatString{
			Format:          &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: &structpb.Struct{Fields: fields}},
			OmitEmptyValues: f != nil && f.OmitEmptyValues,
		}
	case b.File != nil:
		path = b.File.Path
		f := b.File.Format
		switch {
		case f == nil || f.Type == "Plain":
			text := kumaTCPFormat
			if f != nil {
				text = f.Plain
			}
			sfs = &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
				TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: vars.Replace(text + "\n")}},
			}}
		default:
			sfs = &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: jsonFields(f.JSON, vars)}}
		}
		sfs.OmitEmptyValues = f != nil && f.OmitEmptyValues
	default:
		return nil, fmt.Errorf("access log backend of type %q has no tcp or file", b.Type)
	}
	return &accesslogv3.AccessLog{
		Name: "envoy.access_loggers.file",
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: detAny(&filealv3.FileAccessLog{
			Path:            path,
			AccessLogFormat: &filealv3.FileAccessLog_LogFormat{LogFormat: sfs},
		})},
	}, nil
}

func jsonFields(kvs []AccessLogJSON, vars *strings.Replacer) *structpb.Struct {
	fields := map[string]*structpb.Value{}
	for _, kv := range kvs {
		fields[kv.Key] = structpb.NewStringValue(vars.Replace(kv.Value))
	}
	return &structpb.Struct{Fields: fields}
}

// detAny packs deterministically, so a rebuild with the same policies
// gives the same bytes and the same snapshot version.
func detAny(m proto.Message) *anypb.Any {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		panic(err)
	}
	return a
}
