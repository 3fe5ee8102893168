package bootstraprewrite

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

const fileBasedMetadata = "envoy.grpc_credentials.file_based_metadata"

// upstreamFrom reads how the ADS service reaches the control plane.
func (rw *rewriter) upstreamFrom(svc object) error {
	for _, h := range list(svc, "initialMetadata") {
		ho, ok := h.(object)
		if !ok {
			continue
		}
		if strings.EqualFold(str(ho, "key"), "authorization") {
			rw.up.HadToken = true
			continue
		}
		rw.up.Metadata = append(rw.up.Metadata, cpdial.Header{Key: strings.ToLower(str(ho, "key")), Value: str(ho, "value")})
	}
	if eg := obj(svc, "envoyGrpc"); eg != nil {
		rw.cluster = str(eg, "clusterName")
		if rw.cluster == "" {
			return errors.New("ads_config envoy_grpc has no cluster_name")
		}
		if n, ok := number(get(eg, "maxReceiveMessageLength")); ok {
			rw.up.MaxReceiveMessageLength = n
		}
		return rw.fromCluster()
	}
	if gg := obj(svc, "googleGrpc"); gg != nil {
		rw.up.GoogleGRPC = true
		return rw.fromGoogleGRPC(gg)
	}
	return errors.New("ads_config's gRPC service is neither envoy_grpc nor google_grpc")
}

func (rw *rewriter) fromCluster() error {
	c := rw.staticCluster(rw.cluster)
	if c == nil {
		return fmt.Errorf("static cluster %q named by ads_config is missing", rw.cluster)
	}
	var sa object
	for _, e := range list(obj(c, "loadAssignment"), "endpoints") {
		eo, _ := e.(object)
		for _, lb := range list(eo, "lbEndpoints") {
			lbo, _ := lb.(object)
			if sa == nil {
				sa = obj(lbo, "endpoint", "address", "socketAddress")
			}
		}
	}
	port, ok := number(get(sa, "portValue"))
	if sa == nil || str(sa, "address") == "" || !ok {
		return fmt.Errorf("cluster %q has no endpoint with a socket address and port", rw.cluster)
	}
	host := str(sa, "address")
	rw.up.Address = net.JoinHostPort(host, strconv.Itoa(port))

	ts := obj(c, "transportSocket", "typedConfig")
	if !strings.HasSuffix(str(ts, "@type"), ".UpstreamTlsContext") {
		return fmt.Errorf("cluster %q reaches the control plane without TLS; zoneproxy relays only to a TLS control plane", rw.cluster)
	}
	common := obj(ts, "commonTlsContext")
	vc := obj(common, "validationContext")
	if vc == nil {
		vc = obj(common, "combinedValidationContext", "defaultValidationContext")
	}
	if vc == nil {
		name := str(obj(common, "validationContextSdsSecretConfig"), "name")
		if name == "" {
			name = str(obj(common, "combinedValidationContext", "validationContextSdsSecretConfig"), "name")
		}
		vc = rw.staticSecret(name)
	}
	if vc == nil {
		return fmt.Errorf("cluster %q has no validation context for the control plane's certificate", rw.cluster)
	}
	ca, err := dataSource(obj(vc, "trustedCa"))
	if err != nil {
		return fmt.Errorf("cluster %q trusted_ca: %w", rw.cluster, err)
	}
	rw.up.CAPEM = ca
	rw.up.ServerName = host
	if sni := str(ts, "sni"); sni != "" {
		rw.up.ServerName = sni
	}
	for _, m := range list(vc, "matchTypedSubjectAltNames") {
		if mo, ok := m.(object); ok {
			if exact := str(obj(mo, "matcher"), "exact"); exact != "" {
				rw.up.ServerName = exact
				break
			}
		}
	}
	return nil
}

func (rw *rewriter) staticSecret(name string) object {
	if name == "" {
		return nil
	}
	for _, s := range list(obj(rw.root, "staticResources"), "secrets") {
		if so, ok := s.(object); ok && str(so, "name") == name {
			return obj(so, "validationContext")
		}
	}
	return nil
}

func (rw *rewriter) fromGoogleGRPC(gg object) error {
	rw.target = str(gg, "targetUri")
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
	for k, v := range obj(gg, "channelArgs", "args") {
		vo, _ := v.(object)
		switch k {
		case "grpc.ssl_target_name_override":
			rw.up.ServerName = str(vo, "stringValue")
		case "grpc.max_receive_message_length":
			if n, ok := number(get(vo, "intValue")); ok {
				rw.up.MaxReceiveMessageLength = n
			}
		}
	}
	ssl := obj(gg, "channelCredentials", "sslCredentials")
	if ssl == nil {
		return fmt.Errorf("google_grpc to %s has no ssl_credentials; zoneproxy relays only to a TLS control plane", rw.target)
	}
	if roots := obj(ssl, "rootCerts"); roots != nil {
		if rw.up.CAPEM, err = dataSource(roots); err != nil {
			return fmt.Errorf("google_grpc root_certs: %w", err)
		}
	}
	for _, cc := range list(gg, "callCredentials") {
		cco, _ := cc.(object)
		fp := obj(cco, "fromPlugin")
		if str(fp, "name") == fileBasedMetadata {
			rw.up.TokenPath = str(obj(fp, "typedConfig", "secretData"), "filename")
			rw.up.HadToken = rw.up.TokenPath != ""
		}
	}
	return nil
}

// dataSource reads an Envoy DataSource.
func dataSource(ds object) ([]byte, error) {
	switch {
	case ds == nil:
		return nil, errors.New("missing")
	case get(ds, "inlineBytes") != nil:
		return base64.StdEncoding.DecodeString(str(ds, "inlineBytes"))
	case get(ds, "inlineString") != nil:
		return []byte(str(ds, "inlineString")), nil
	case get(ds, "filename") != nil:
		return os.ReadFile(str(ds, "filename"))
	}
	return nil, errors.New("neither inline_bytes, inline_string nor filename")
}

// number reads a JSON number or a decimal string (protojson's 64-bit form).
func number(v any) (int, bool) {
	switch t := v.(type) {
	case int:
		return t, t >= 0
	case uint64:
		return int(t), t < 1<<62
	case float64:
		return int(t), t >= 0 && t == float64(int(t))
	case string:
		n, err := strconv.Atoi(t)
		return n, err == nil && n >= 0
	}
	return 0, false
}
