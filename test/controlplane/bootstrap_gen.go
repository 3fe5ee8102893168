package controlplane

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	grpccredv3 "github.com/envoyproxy/go-control-plane/envoy/config/grpc_credential/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	filealv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	re2v3 "github.com/envoyproxy/go-control-plane/envoy/extensions/regex_engines/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"
)

// bootstrapRequest is kuma's BootstrapRequest (JSON keys as kuma-dp sends).
type bootstrapRequest struct {
	Mesh                  string            `json:"mesh"`
	Name                  string            `json:"name"`
	ProxyType             string            `json:"proxyType"`
	DataplaneToken        string            `json:"dataplaneToken,omitempty"`
	DataplaneTokenPath    string            `json:"dataplaneTokenPath,omitempty"`
	DataplaneResource     string            `json:"dataplaneResource,omitempty"`
	Version               versionInfo       `json:"version"`
	CaCert                string            `json:"caCert"`
	DynamicMetadata       map[string]string `json:"dynamicMetadata"`
	OtelEnv               map[string]any    `json:"otelEnv,omitempty"`
	DNSPort               uint32            `json:"dnsPort,omitempty"`
	ReadinessPort         uint32            `json:"readinessPort,omitempty"`
	AppProbeProxyDisabled bool              `json:"appProbeProxyDisabled,omitempty"`
	OperatingSystem       string            `json:"operatingSystem"`
	Features              []string          `json:"features"`
	Resources             struct {
		MaxHeapSizeBytes uint64 `json:"maxHeapSizeBytes"`
	} `json:"resources"`
	Workdir          string `json:"workdir"`
	MetricsResources struct {
		CertPath string `json:"certPath"`
		KeyPath  string `json:"keyPath"`
	} `json:"metricsResources"`
	SystemCaPath    string         `json:"systemCaPath"`
	DataplaneConfig map[string]any `json:"dataplaneConfig,omitempty"`
	IPv6Enabled     bool           `json:"ipv6Enabled"`
	SpireResources  struct {
		SocketPath string `json:"socketPath"`
	} `json:"spireResources"`
}

type versionInfo struct {
	KumaDp struct {
		Version   string `json:"version"`
		GitTag    string `json:"gitTag"`
		GitCommit string `json:"gitCommit"`
		BuildDate string `json:"buildDate"`
	} `json:"kumaDp"`
	Envoy struct {
		Version          string `json:"version"`
		Build            string `json:"build"`
		KumaDpCompatible bool   `json:"kumaDpCompatible"`
	} `json:"envoy"`
}

// bootstrap defaults of kuma-cp's bootstrapServer.params.
const (
	defaultAdminAddress  = "127.0.0.1"
	defaultAdminPort     = 9901
	adminAccessLogPath   = "/dev/null"
	xdsConnectTimeout    = time.Second
	adsClusterName       = "system_ads"
	accessLogSinkCluster = "system_access_log_sink"
	cpValidationCtx      = "cp_validation_ctx"
	fileBasedMetadata    = "envoy.grpc_credentials.file_based_metadata"
	// xdsGrpcMaxReceiveMessageBytes is kuma-cp's default (4 MiB).
	xdsGrpcMaxReceiveMessageBytes = 4 << 20
)

type bootstrapParams struct {
	req       *bootstrapRequest
	dp        *dataplane
	xdsHost   string
	xdsPort   uint32
	caPEM     []byte
	adminPort uint32
	lookupIP  func(string) ([]net.IP, error)
	// reloadable is dpServer.authn.enableReloadableTokens.
	reloadable bool
	// runtime overrides or adds values of the "kuma" static layer.
	runtime map[string]float64
	// kuma is the release modelled (Options.Kuma).
	kuma string
}

// socketName is kuma's rule: the path is cut at 98 bytes before ".sock".
func socketName(path string) string {
	if len(path) > 98 {
		path = path[:98]
	}
	return path + ".sock"
}

func adminSocketPath(workdir string) string {
	return socketName(filepath.Join(workdir, "kuma-envoy-admin"))
}

func accessLogSocketPath(workdir, name, mesh string) string {
	return socketName(filepath.Join(workdir, "kuma-al-"+name+"-"+mesh))
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

// generateBootstrap builds the Envoy bootstrap the way kuma-cp shapes it.
func generateBootstrap(p bootstrapParams) (*bootstrapv3.Bootstrap, error) {
	req := p.req
	metadata, err := nodeMetadata(p)
	if err != nil {
		return nil, err
	}
	cluster := p.dp.workload()
	if cluster == "" {
		cluster = "unknown"
	}

	// With reloadable tokens and a token path, Envoy's own gRPC client reads
	// the token file per stream; otherwise the token is baked in.
	tokenFromFile := p.reloadable && req.DataplaneTokenPath != ""
	adsCluster, alSinkCluster := p.systemClusterNames()
	clusters := []*clusterv3.Cluster{accessLogSink(req, alSinkCluster)}
	var grpcService *corev3.GrpcService
	if tokenFromFile {
		grpcService = googleGRPCService(p)
	} else {
		grpcService = &corev3.GrpcService{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: adsCluster}},
		}
		if req.DataplaneToken != "" {
			grpcService.InitialMetadata = []*corev3.HeaderValue{{Key: "authorization", Value: req.DataplaneToken}}
		}
		clusters = append(clusters, xdsCluster(p, adsCluster))
	}
	adsSource := func() *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			InitialFetchTimeout:   durationpb.New(0),
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}
	}

	b := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{
			Id:       req.Mesh + "." + req.Name,
			Cluster:  cluster,
			Metadata: metadata,
		},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:                   p.adsAPIType(),
				TransportApiVersion:       corev3.ApiVersion_V3,
				SetNodeOnFirstMessageOnly: true,
				GrpcServices:              []*corev3.GrpcService{grpcService},
			},
			LdsConfig: adsSource(),
			CdsConfig: adsSource(),
		},
		HdsConfig: &corev3.ApiConfigSource{
			ApiType:                   corev3.ApiConfigSource_GRPC,
			TransportApiVersion:       corev3.ApiVersion_V3,
			SetNodeOnFirstMessageOnly: true,
			GrpcServices:              []*corev3.GrpcService{proto.Clone(grpcService).(*corev3.GrpcService)},
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: clusters,
			Secrets: []*tlsv3.Secret{{
				Name: cpValidationCtx,
				Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: p.caPEM}},
					MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{
						{SanType: tlsv3.SubjectAltNameMatcher_DNS, Matcher: exactMatcher(p.xdsHost)},
						{SanType: tlsv3.SubjectAltNameMatcher_IP_ADDRESS, Matcher: exactMatcher(p.xdsHost)},
					},
				}},
			}},
		},
		LayeredRuntime: &bootstrapv3.LayeredRuntime{
			Layers: []*bootstrapv3.RuntimeLayer{{
				Name:           "kuma",
				LayerSpecifier: &bootstrapv3.RuntimeLayer_StaticLayer{StaticLayer: &structpb.Struct{Fields: kumaRuntime(p.runtime)}},
			}},
		},
		StatsConfig: &metricsv3.StatsConfig{StatsTags: p.statsTags()},
		DefaultRegexEngine: &corev3.TypedExtensionConfig{
			Name:        "envoy.regex_engines.google_re2",
			TypedConfig: mustAny(&re2v3.GoogleRE2{}),
		},
	}
	if p.adminPort != 0 {
		b.Admin = &bootstrapv3.Admin{
			AccessLog: []*accesslogv3.AccessLog{{
				Name:       "envoy.access_loggers.file",
				ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(&filealv3.FileAccessLog{Path: adminAccessLogPath})},
			}},
		}
		if req.Workdir != "" {
			b.Admin.Address = &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: adminSocketPath(req.Workdir), Mode: 0o600}}}
		} else {
			b.Admin.Address = socketAddress(defaultAdminAddress, p.adminPort)
		}
	}
	if err := b.ValidateAll(); err != nil {
		return nil, err
	}
	return b, nil
}

func exactMatcher(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func socketAddress(addr string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       addr,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func http2Options() map[string]*anypb.Any {
	return map[string]*anypb.Any{
		"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(&httpv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
			}},
		}),
	}
}

func keepalive() *clusterv3.UpstreamConnectionOptions {
	return &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{
		KeepaliveProbes:   wrapperspb.UInt32(3),
		KeepaliveTime:     wrapperspb.UInt32(10),
		KeepaliveInterval: wrapperspb.UInt32(10),
	}}
}

func singleEndpoint(name string, addr *corev3.Address) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}},
			}},
		}},
	}
}

func accessLogSink(req *bootstrapRequest, name string) *clusterv3.Cluster {
	addr := &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: accessLogSocketPath(req.Workdir, req.Name, req.Mesh)}}}
	return &clusterv3.Cluster{
		Name:                          name,
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:                durationpb.New(xdsConnectTimeout),
		LoadAssignment:                singleEndpoint(name, addr),
		TypedExtensionProtocolOptions: http2Options(),
		UpstreamConnectionOptions:     keepalive(),
	}
}

func xdsCluster(p bootstrapParams, name string) *clusterv3.Cluster {
	typ := clusterv3.Cluster_STRICT_DNS
	if net.ParseIP(p.xdsHost) != nil {
		typ = clusterv3.Cluster_STATIC
	}
	tlsCtx := &tlsv3.UpstreamTlsContext{
		Sni: p.xdsHost,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: cpValidationCtx},
			},
		},
	}
	return &clusterv3.Cluster{
		Name:                          name,
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: typ},
		DnsLookupFamily:               dnsLookupFamily(p.xdsHost, p.lookupIP),
		ConnectTimeout:                durationpb.New(xdsConnectTimeout),
		LoadAssignment:                singleEndpoint(name, socketAddress(p.xdsHost, p.xdsPort)),
		TypedExtensionProtocolOptions: http2Options(),
		UpstreamConnectionOptions:     keepalive(),
		TransportSocket: &corev3.TransportSocket{
			Name:       "envoy.transport_sockets.tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(tlsCtx)},
		},
	}
}

// googleGRPCService is kuma-cp's ADS/HDS service with reloadable tokens
// (template_v3.go buildGrpcService): google_grpc straight to the xDS
// address, the token from the file-based metadata plugin.
func googleGRPCService(p bootstrapParams) *corev3.GrpcService {
	intArg := func(n int64) *corev3.GrpcService_GoogleGrpc_ChannelArgs_Value {
		return &corev3.GrpcService_GoogleGrpc_ChannelArgs_Value{ValueSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelArgs_Value_IntValue{IntValue: n}}
	}
	gg := &corev3.GrpcService_GoogleGrpc{
		TargetUri:              net.JoinHostPort(p.xdsHost, strconv.FormatUint(uint64(p.xdsPort), 10)),
		StatPrefix:             "ads",
		CredentialsFactoryName: fileBasedMetadata,
		CallCredentials: []*corev3.GrpcService_GoogleGrpc_CallCredentials{{
			CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_CallCredentials_FromPlugin{
				FromPlugin: &corev3.GrpcService_GoogleGrpc_CallCredentials_MetadataCredentialsFromPlugin{
					Name: fileBasedMetadata,
					ConfigType: &corev3.GrpcService_GoogleGrpc_CallCredentials_MetadataCredentialsFromPlugin_TypedConfig{
						TypedConfig: mustAny(&grpccredv3.FileBasedMetadataConfig{
							SecretData: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: p.req.DataplaneTokenPath}},
						}),
					},
				},
			},
		}},
		ChannelArgs: &corev3.GrpcService_GoogleGrpc_ChannelArgs{Args: map[string]*corev3.GrpcService_GoogleGrpc_ChannelArgs_Value{
			"grpc.keepalive_time_ms":            intArg(10000),
			"grpc.keepalive_timeout_ms":         intArg(30000),
			"grpc.http2.max_pings_without_data": intArg(0),
			"grpc.max_receive_message_length":   intArg(xdsGrpcMaxReceiveMessageBytes),
		}},
	}
	if p.caPEM != nil {
		gg.ChannelCredentials = &corev3.GrpcService_GoogleGrpc_ChannelCredentials{
			CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelCredentials_SslCredentials{SslCredentials: &corev3.GrpcService_GoogleGrpc_SslCredentials{
				RootCerts: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: p.caPEM}},
			}},
		}
	}
	return &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: gg}}
}

// dnsLookupFamily: the CP resolves the xDS host itself; V4_ONLY when it
// only has IPv4 addresses, AUTO otherwise (always for localhost).
func dnsLookupFamily(host string, lookup func(string) ([]net.IP, error)) clusterv3.Cluster_DnsLookupFamily {
	if host == "localhost" {
		return clusterv3.Cluster_AUTO
	}
	if lookup == nil {
		lookup = net.LookupIP
	}
	ips, err := lookup(host)
	if err != nil || len(ips) == 0 {
		return clusterv3.Cluster_AUTO
	}
	for _, ip := range ips {
		if ip.To4() == nil {
			return clusterv3.Cluster_AUTO
		}
	}
	return clusterv3.Cluster_V4_ONLY
}

func nodeMetadata(p bootstrapParams) (*structpb.Struct, error) {
	req := p.req
	features := make([]any, 0, len(req.Features))
	for _, f := range req.Features {
		features = append(features, f)
	}
	version, err := toStructValue(req.Version)
	if err != nil {
		return nil, err
	}
	m := map[string]*structpb.Value{
		"version":               version,
		"features":              structpb.NewListValue(mustList(features)),
		"workdir":               structpb.NewStringValue(req.Workdir),
		"metricsCertPath":       structpb.NewStringValue(req.MetricsResources.CertPath),
		"metricsKeyPath":        structpb.NewStringValue(req.MetricsResources.KeyPath),
		"systemCaPath":          structpb.NewStringValue(req.SystemCaPath),
		"spireAgent.socketPath": structpb.NewStringValue(req.SpireResources.SocketPath),
		"ipv6Enabled":           structpb.NewBoolValue(req.IPv6Enabled),
		"dataplane.proxyType":   structpb.NewStringValue(req.ProxyType),
	}
	if req.DataplaneResource != "" {
		m["dataplane.resource"] = structpb.NewStringValue(req.DataplaneResource)
	}
	if p.adminPort != 0 {
		m["dataplane.admin.port"] = structpb.NewStringValue(strconv.FormatUint(uint64(p.adminPort), 10))
		m["dataplane.admin.address"] = structpb.NewStringValue(defaultAdminAddress)
		if req.Workdir != "" {
			m["dataplane.admin.socketPath"] = structpb.NewStringValue(adminSocketPath(req.Workdir))
		}
	}
	if req.DNSPort != 0 {
		m["dataplane.dns.port"] = structpb.NewStringValue(strconv.FormatUint(uint64(req.DNSPort), 10))
	}
	if req.ReadinessPort != 0 {
		m["dataplane.readinessReporter.port"] = structpb.NewStringValue(strconv.FormatUint(uint64(req.ReadinessPort), 10))
	}
	if req.AppProbeProxyDisabled {
		m["dataplane.appProbeProxy.enabled"] = structpb.NewStringValue("true")
	}
	if len(req.DynamicMetadata) > 0 {
		v, err := toStructValue(req.DynamicMetadata)
		if err != nil {
			return nil, err
		}
		m["dynamicMetadata"] = v
	}
	if req.OtelEnv != nil {
		v, err := toStructValue(req.OtelEnv)
		if err != nil {
			return nil, err
		}
		m["otelEnvInventory"] = v
	}
	return &structpb.Struct{Fields: m}, nil
}

func mustList(v []any) *structpb.ListValue {
	l, err := structpb.NewList(v)
	if err != nil {
		panic(err)
	}
	return l
}

func toStructValue(v any) (*structpb.Value, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		return nil, err
	}
	return structpb.NewValue(generic)
}

// bootstrapYAML serializes like kuma's proto.ToYAML: protojson (camelCase,
// @type on Any) converted to YAML.
func bootstrapYAML(b *bootstrapv3.Bootstrap) ([]byte, error) {
	js, err := protojson.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("marshal bootstrap: %w", err)
	}
	return yaml.JSONToYAML(js)
}

// kumaRuntime is kuma-cp's static runtime layer, with overrides.
func kumaRuntime(overrides map[string]float64) map[string]*structpb.Value {
	fields := map[string]*structpb.Value{
		"re2.max_program_size.error_level": structpb.NewNumberValue(4294967295),
		"re2.max_program_size.warn_level":  structpb.NewNumberValue(1000),
	}
	for k, v := range overrides {
		fields[k] = structpb.NewNumberValue(v)
	}
	return fields
}
