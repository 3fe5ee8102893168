package bootstraprewrite

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpccredentialv3 "github.com/envoyproxy/go-control-plane/envoy/config/grpc_credential/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

const fileBasedMetadata = "envoy.grpc_credentials.file_based_metadata"

// upstreamFrom reads how the ADS service reaches the control plane.
func (rw *rewriter) upstreamFrom(svc *corev3.GrpcService) error {
	for _, h := range svc.GetInitialMetadata() {
		if strings.EqualFold(h.GetKey(), "authorization") {
			rw.up.HadToken = true
			continue
		}
		rw.up.Metadata = append(rw.up.Metadata, cpdial.Header{Key: strings.ToLower(h.GetKey()), Value: h.GetValue()})
	}
	if eg := svc.GetEnvoyGrpc(); eg != nil {
		rw.cluster = eg.GetClusterName()
		if rw.cluster == "" {
			return errors.New("ads_config envoy_grpc has no cluster_name")
		}
		if n := eg.GetMaxReceiveMessageLength(); n != nil {
			rw.up.MaxReceiveMessageLength = int(n.GetValue())
		}
		return rw.fromCluster()
	}
	if gg := svc.GetGoogleGrpc(); gg != nil {
		rw.up.GoogleGRPC = true
		return rw.fromGoogleGRPC(gg)
	}
	return errors.New("ads_config's gRPC service is neither envoy_grpc nor google_grpc")
}

func (rw *rewriter) fromCluster() error {
	_, clusters, i := rw.staticCluster(rw.cluster)
	if i < 0 {
		return fmt.Errorf("static cluster %q named by ads_config is missing", rw.cluster)
	}
	c := clusters[i]
	sa, err := firstSocketAddress(c.Object("load_assignment"))
	if err != nil {
		return fmt.Errorf("cluster %q load_assignment: %w", rw.cluster, err)
	}
	_, hasPort := sa.GetPortSpecifier().(*corev3.SocketAddress_PortValue)
	if sa.GetAddress() == "" || !hasPort {
		return fmt.Errorf("cluster %q has no endpoint with a socket address and port", rw.cluster)
	}
	host := sa.GetAddress()
	rw.up.Address = net.JoinHostPort(host, strconv.Itoa(int(sa.GetPortValue())))

	tls, err := rw.upstreamTLS(c)
	if err != nil {
		return err
	}
	common := tls.GetCommonTlsContext()
	vc := common.GetValidationContext()
	if vc == nil {
		vc = common.GetCombinedValidationContext().GetDefaultValidationContext()
	}
	if vc == nil {
		name := common.GetValidationContextSdsSecretConfig().GetName()
		if name == "" {
			name = common.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName()
		}
		vc = rw.staticSecret(name)
	}
	if vc == nil {
		return fmt.Errorf("cluster %q has no validation context for the control plane's certificate", rw.cluster)
	}
	ca, err := dataSource(vc.GetTrustedCa())
	if err != nil {
		return fmt.Errorf("cluster %q trusted_ca: %w", rw.cluster, err)
	}
	rw.up.CAPEM = ca
	rw.up.ServerName = host
	if sni := tls.GetSni(); sni != "" {
		rw.up.ServerName = sni
	}
	for _, m := range vc.GetMatchTypedSubjectAltNames() {
		if exact := m.GetMatcher().GetExact(); exact != "" {
			rw.up.ServerName = exact
			break
		}
	}
	return nil
}

// firstSocketAddress is the address of the load assignment's first
// endpoint (nil if it has none): ClusterLoadAssignment is not linked, its
// Address is.
func firstSocketAddress(la *bootstrapdoc.Object) (*corev3.SocketAddress, error) {
	for _, locality := range la.ObjectsIn("endpoints") {
		for _, lb := range locality.ObjectsIn("lb_endpoints") {
			addr := &corev3.Address{}
			if _, err := lb.Object("endpoint").DecodeKnown("address", addr); err != nil {
				return nil, err
			}
			if sa := addr.GetSocketAddress(); sa != nil {
				return sa, nil
			}
		}
	}
	return nil, nil
}

// upstreamTLS is the cluster's UpstreamTlsContext; its type is checked
// first, so that another transport socket reads as "without TLS", not as
// a type this build does not know.
func (rw *rewriter) upstreamTLS(c *bootstrapdoc.Object) (*tlsv3.UpstreamTlsContext, error) {
	withoutTLS := fmt.Errorf("cluster %q reaches the control plane without TLS; zoneproxy relays only to a TLS control plane", rw.cluster)
	typed := c.Object("transport_socket").Object("typed_config")
	if !strings.HasSuffix(typed.String("@type"), ".UpstreamTlsContext") {
		return nil, withoutTLS
	}
	ts := &corev3.TransportSocket{}
	if _, err := c.DecodeKnown("transport_socket", ts); err != nil {
		return nil, fmt.Errorf("cluster %q %w", rw.cluster, err)
	}
	tls := &tlsv3.UpstreamTlsContext{}
	if err := ts.GetTypedConfig().UnmarshalTo(tls); err != nil {
		return nil, withoutTLS
	}
	return tls, nil
}

func (rw *rewriter) staticSecret(name string) *tlsv3.CertificateValidationContext {
	if name == "" {
		return nil
	}
	for _, s := range rw.root.Object("static_resources").ObjectsIn("secrets") {
		if s.String("name") != name {
			continue
		}
		vc := &tlsv3.CertificateValidationContext{}
		if found, err := s.DecodeKnown("validation_context", vc); found && err == nil {
			return vc
		}
	}
	return nil
}

func (rw *rewriter) fromGoogleGRPC(gg *corev3.GrpcService_GoogleGrpc) error {
	rw.target = gg.GetTargetUri()
	addr := rw.target
	for _, p := range []string{"dns:///", "dns:", "ipv4:", "ipv6:"} {
		addr = strings.TrimPrefix(addr, p)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("google_grpc target_uri %q is not host:port", rw.target)
	}
	rw.up.Address = addr
	rw.up.ServerName = host
	for k, v := range gg.GetChannelArgs().GetArgs() {
		switch k {
		case "grpc.ssl_target_name_override":
			rw.up.ServerName = v.GetStringValue()
		case "grpc.max_receive_message_length":
			if n, ok := v.GetValueSpecifier().(*corev3.GrpcService_GoogleGrpc_ChannelArgs_Value_IntValue); ok && n.IntValue >= 0 {
				rw.up.MaxReceiveMessageLength = int(n.IntValue)
			}
		}
	}
	ssl := gg.GetChannelCredentials().GetSslCredentials()
	if ssl == nil {
		return fmt.Errorf("google_grpc to %s has no ssl_credentials; zoneproxy relays only to a TLS control plane", rw.target)
	}
	if roots := ssl.GetRootCerts(); roots != nil {
		if rw.up.CAPEM, err = dataSource(roots); err != nil {
			return fmt.Errorf("google_grpc root_certs: %w", err)
		}
	}
	for _, cc := range gg.GetCallCredentials() {
		fp := cc.GetFromPlugin()
		if fp.GetName() != fileBasedMetadata {
			continue
		}
		cfg := &grpccredentialv3.FileBasedMetadataConfig{}
		if fp.GetTypedConfig() == nil {
			continue
		}
		if err := fp.GetTypedConfig().UnmarshalTo(cfg); err != nil {
			return fmt.Errorf("google_grpc %s: %w", fileBasedMetadata, err)
		}
		rw.up.TokenPath = cfg.GetSecretData().GetFilename()
		rw.up.HadToken = rw.up.TokenPath != ""
	}
	return nil
}

// dataSource reads an Envoy DataSource.
func dataSource(ds *corev3.DataSource) ([]byte, error) {
	switch s := ds.GetSpecifier().(type) {
	case nil:
		if ds == nil {
			return nil, errors.New("missing")
		}
	case *corev3.DataSource_InlineBytes:
		return s.InlineBytes, nil
	case *corev3.DataSource_InlineString:
		return []byte(s.InlineString), nil
	case *corev3.DataSource_Filename:
		return os.ReadFile(s.Filename)
	}
	return nil, errors.New("neither inline_bytes, inline_string nor filename")
}
