package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// loadBootstrap follows InstanceUtil::loadBootstrapConfig: the file (format by
// extension), merged with --config-yaml, then proto constraint validation and
// the checks Envoy makes while building the server from it.
func loadBootstrap(o *options, log *logger) (*bootstrapv3.Bootstrap, error) {
	if o.configPath == "" && o.configYAML == "" {
		return nil, errNoConfig
	}
	b := &bootstrapv3.Bootstrap{}
	if o.configPath != "" {
		data, err := os.ReadFile(o.configPath)
		if err != nil {
			return nil, fmt.Errorf("unable to read file: %s", o.configPath)
		}
		if err := unmarshalByExtension(o.configPath, data, b, o.allowUnknownStatic, log); err != nil {
			return nil, err
		}
	}
	if o.configYAML != "" {
		over := &bootstrapv3.Bootstrap{}
		if err := unmarshalYAML([]byte(o.configYAML), over, o.allowUnknownStatic, log); err != nil {
			return nil, err
		}
		proto.Merge(b, over)
	}
	if err := validateDeep(b); err != nil {
		return nil, err
	}
	if err := checkBootstrap(b, o); err != nil {
		return nil, err
	}
	return b, nil
}

func unmarshalByExtension(path string, data []byte, m proto.Message, allowUnknown bool, log *logger) error {
	lower := strings.ToLower(path)
	switch {
	case strings.HasSuffix(lower, ".pb"):
		if err := proto.Unmarshal(data, m); err != nil {
			return fmt.Errorf("Unable to parse file \"%s\" as a binary protobuf (type %s)", path, m.ProtoReflect().Descriptor().FullName())
		}
		return nil
	case strings.HasSuffix(lower, ".pb_text"):
		if err := (prototext.UnmarshalOptions{DiscardUnknown: false, Resolver: typeResolver}).Unmarshal(data, m); err != nil {
			return fmt.Errorf("Unable to parse file \"%s\" as a text protobuf (type %s)", path, m.ProtoReflect().Descriptor().FullName())
		}
		return nil
	case strings.HasSuffix(lower, ".yaml"), strings.HasSuffix(lower, ".yml"):
		return unmarshalYAML(data, m, allowUnknown, log)
	default:
		return unmarshalJSON(data, m, allowUnknown, log)
	}
}

func unmarshalYAML(data []byte, m proto.Message, allowUnknown bool, log *logger) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("Unable to parse YAML as proto: %s", trimProtoErr(err))
	}
	// Envoy takes only a mapping or a list at the top; an empty file is null.
	if t := strings.TrimSpace(string(j)); !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
		return errors.New("Unable to convert YAML as JSON: " + string(data))
	}
	return unmarshalJSON(j, m, allowUnknown, log)
}

// unmarshalJSON mirrors MessageUtil::loadFromJson: a strict parse, then a
// lenient one to tell "unknown field" apart from other errors.
func unmarshalJSON(data []byte, m proto.Message, allowUnknown bool, log *logger) error {
	strict := protojson.UnmarshalOptions{DiscardUnknown: false, Resolver: typeResolver}
	err := strict.Unmarshal(data, m)
	if err == nil {
		return nil
	}
	lenient := protojson.UnmarshalOptions{DiscardUnknown: true, Resolver: typeResolver}
	proto.Reset(m)
	if err2 := lenient.Unmarshal(data, m); err2 != nil {
		return fmt.Errorf("Unable to parse JSON as proto (INVALID_ARGUMENT:%s)", trimProtoErr(err2))
	}
	reason := fmt.Sprintf("type %s reason INVALID_ARGUMENT:%s", m.ProtoReflect().Descriptor().FullName(), trimProtoErr(err))
	if allowUnknown {
		if log != nil {
			log.logf(lvlWarn, "misc", "source/common/protobuf/message_validator_impl.cc:21", "Unknown field: %s", reason)
		}
		return nil
	}
	return fmt.Errorf("Protobuf message (%s) has unknown fields", reason)
}

func trimProtoErr(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "proto: ")
	s = strings.TrimPrefix(s, "proto:\u00a0")
	return s
}

// checkBootstrap holds the semantic checks Envoy performs outside PGV while
// creating the cluster manager, listeners, admin and the xDS muxes.
func checkBootstrap(b *bootstrapv3.Bootstrap, o *options) error {
	if err := newStatStore().setTagSpecifiers(tagSpecs(b), useDefaultTags(b), o.statsTags); err != nil {
		return err
	}
	node := effectiveNode(b, o)
	static := b.GetStaticResources()
	seen := map[string]bool{}
	staticSecrets := map[string]*tlsv3.Secret{}
	for _, s := range static.GetSecrets() {
		staticSecrets[s.GetName()] = s
		// Static secrets are read at start-up, so a missing file fails it.
		for _, ds := range []*corev3.DataSource{
			s.GetTlsCertificate().GetCertificateChain(), s.GetTlsCertificate().GetPrivateKey(),
			s.GetValidationContext().GetTrustedCa(),
		} {
			if ds != nil {
				if _, _, err := readDataSource(ds); err != nil {
					return err
				}
			}
		}
	}
	for _, c := range static.GetClusters() {
		if seen[c.GetName()] {
			return fmt.Errorf("cluster manager: duplicate cluster '%s'", c.GetName())
		}
		seen[c.GetName()] = true
		if err := checkCluster(c, staticSecrets); err != nil {
			return err
		}
	}
	seenL := map[string]bool{}
	for _, l := range static.GetListeners() {
		if l.GetName() != "" && seenL[l.GetName()] {
			return fmt.Errorf("error adding listener named '%s': duplicate listener name", l.GetName())
		}
		seenL[l.GetName()] = true
		if err := checkListener(l, staticSecrets); err != nil {
			return err
		}
	}
	if p := b.GetAdmin().GetAddress().GetPipe(); p != nil {
		if err := checkPipePath(p); err != nil {
			return err
		}
	}
	if hds := b.GetHdsConfig(); hds != nil {
		if len(hds.GetGrpcServices()) != 1 {
			return errors.New("envoy.config.core.v3.ApiConfigSource must have a single gRPC service specified")
		}
		if eg := hds.GetGrpcServices()[0].GetEnvoyGrpc(); eg != nil && !seen[eg.GetClusterName()] {
			return fmt.Errorf("Unknown gRPC client cluster '%s'", eg.GetClusterName())
		}
	}
	dr := b.GetDynamicResources()
	if dr == nil {
		return nil
	}
	usesADS := func(cs *corev3.ConfigSource) bool { return cs != nil && cs.GetAds() != nil }
	if ads := dr.GetAdsConfig(); ads != nil {
		switch ads.GetApiType() {
		case corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC,
			corev3.ApiConfigSource_AGGREGATED_GRPC, corev3.ApiConfigSource_AGGREGATED_DELTA_GRPC:
		default:
			return fmt.Errorf("ads_config must be of gRPC type, got %s", ads.GetApiType())
		}
		if len(ads.GetGrpcServices()) != 1 {
			return fmt.Errorf("envoy.config.core.v3.ApiConfigSource must have a single gRPC service specified")
		}
		if node.GetId() == "" || node.GetCluster() == "" {
			return errors.New("ads: node 'id' and 'cluster' are required. Set it either in 'node' config or via --service-node and --service-cluster options.")
		}
		gs := ads.GetGrpcServices()[0]
		if eg := gs.GetEnvoyGrpc(); eg != nil {
			if !seen[eg.GetClusterName()] {
				return fmt.Errorf("Unknown gRPC client cluster '%s'", eg.GetClusterName())
			}
		} else if gs.GetGoogleGrpc() == nil {
			return errors.New("Unsupported gRPC service: neither envoy_grpc nor google_grpc is set")
		}
	}
	for name, cs := range map[string]*corev3.ConfigSource{"cds": dr.GetCdsConfig(), "lds": dr.GetLdsConfig()} {
		if cs == nil {
			continue
		}
		if usesADS(cs) && dr.GetAdsConfig() == nil {
			return errors.New("Cannot create an ADS subscription: no ads_config in the bootstrap dynamic_resources")
		}
		if node.GetId() == "" || node.GetCluster() == "" {
			return fmt.Errorf("%s: node 'id' and 'cluster' are required. Set it either in 'node' config or via --service-node and --service-cluster options.", name)
		}
	}
	return nil
}

// effectiveNode applies --service-node/--service-cluster/--service-zone
// over the bootstrap node, as LocalInfoImpl does.
func effectiveNode(b *bootstrapv3.Bootstrap, o *options) *corev3.Node {
	n := proto.Clone(b.GetNode()).(*corev3.Node)
	if n == nil {
		n = &corev3.Node{}
	}
	if o.serviceZone != "" {
		if n.Locality == nil {
			n.Locality = &corev3.Locality{}
		}
		n.Locality.Zone = o.serviceZone
	}
	if o.serviceCluster != "" {
		n.Cluster = o.serviceCluster
	}
	if o.serviceNode != "" {
		n.Id = o.serviceNode
	}
	return n
}

// checkCluster covers the cluster-construction errors Envoy raises beyond
// PGV; it is also applied to clusters received over CDS.
func checkCluster(c *clusterv3.Cluster, staticSecrets map[string]*tlsv3.Secret) error {
	switch c.GetType() {
	case clusterv3.Cluster_STATIC:
		for _, ep := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range ep.GetLbEndpoints() {
				sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
				if sa == nil {
					continue
				}
				if _, err := netip.ParseAddr(sa.GetAddress()); err != nil {
					return fmt.Errorf("malformed IP address: %s", sa.GetAddress())
				}
			}
		}
	case clusterv3.Cluster_EDS:
		if c.GetEdsClusterConfig() == nil {
			return errors.New("cannot create an EDS cluster without an EDS config")
		}
	}
	if ts := c.GetTransportSocket(); ts != nil {
		if err := checkTransportSocket(ts, staticSecrets); err != nil {
			return err
		}
	}
	for _, m := range c.GetTransportSocketMatches() {
		if err := checkTransportSocket(m.GetTransportSocket(), staticSecrets); err != nil {
			return err
		}
	}
	return nil
}

func checkTransportSocket(ts *corev3.TransportSocket, staticSecrets map[string]*tlsv3.Secret) error {
	common, err := commonTLSContext(ts)
	if err != nil || common == nil {
		return err
	}
	for _, sc := range common.GetTlsCertificateSdsSecretConfigs() {
		if sc.GetSdsConfig() == nil {
			s, ok := staticSecrets[sc.GetName()]
			if !ok || s.GetTlsCertificate() == nil {
				return fmt.Errorf("Unknown static secret: %s", sc.GetName())
			}
		}
	}
	vcs := common.GetValidationContextSdsSecretConfig()
	if cvc := common.GetCombinedValidationContext(); cvc != nil {
		vcs = cvc.GetValidationContextSdsSecretConfig()
	}
	var vc *tlsv3.CertificateValidationContext
	if vcs != nil && vcs.GetSdsConfig() == nil {
		s, ok := staticSecrets[vcs.GetName()]
		if !ok || s.GetValidationContext() == nil {
			return fmt.Errorf("Unknown static certificate validation context: %s", vcs.GetName())
		}
		vc = s.GetValidationContext()
	}
	if v := common.GetValidationContext(); v != nil {
		vc = v
	}
	if cvc := common.GetCombinedValidationContext(); cvc != nil && cvc.GetDefaultValidationContext() != nil && vc != nil {
		merged := proto.Clone(vc).(*tlsv3.CertificateValidationContext)
		proto.Merge(merged, cvc.GetDefaultValidationContext())
		vc = merged
	} else if cvc != nil && vc == nil && vcs == nil {
		vc = cvc.GetDefaultValidationContext()
	}
	if vc != nil {
		if _, err := peerVerifier(vc); err != nil {
			return err
		}
	}
	certs := append([]*tlsv3.TlsCertificate(nil), common.GetTlsCertificates()...)
	for _, sc := range common.GetTlsCertificateSdsSecretConfigs() {
		if sc.GetSdsConfig() == nil {
			certs = append(certs, staticSecrets[sc.GetName()].GetTlsCertificate())
		}
	}
	for _, c := range certs {
		if c.GetCertificateChain() == nil {
			continue
		}
		if _, err := loadKeyPair(c); err != nil {
			return err
		}
	}
	return nil
}

func tagSpecs(b *bootstrapv3.Bootstrap) []tagSpec {
	var out []tagSpec
	for _, t := range b.GetStatsConfig().GetStatsTags() {
		sp := tagSpec{name: t.GetTagName(), regex: t.GetRegex()}
		if _, ok := t.GetTagValue().(*metricsv3.TagSpecifier_FixedValue); ok {
			v := t.GetFixedValue()
			sp.fixed = &v
		}
		out = append(out, sp)
	}
	return out
}

func useDefaultTags(b *bootstrapv3.Bootstrap) bool {
	u := b.GetStatsConfig().GetUseAllDefaultTags()
	return u == nil || u.GetValue()
}

// commonTLSContext is the TLS context of a transport socket, nil when the
// socket is not TLS.
func commonTLSContext(ts *corev3.TransportSocket) (*tlsv3.CommonTlsContext, error) {
	msg, err := unpackAny(ts.GetTypedConfig())
	if err != nil || msg == nil {
		return nil, err
	}
	switch t := msg.(type) {
	case *tlsv3.UpstreamTlsContext:
		return t.GetCommonTlsContext(), nil
	case *tlsv3.DownstreamTlsContext:
		return t.GetCommonTlsContext(), nil
	}
	return nil, nil
}
