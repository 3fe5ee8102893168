package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpccredv3 "github.com/envoyproxy/go-control-plane/envoy/config/grpc_credential/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

const fileBasedMetadata = "envoy.grpc_credentials.file_based_metadata"

// grpcTarget is how Envoy reaches a GrpcService: envoy_grpc through a
// static cluster, or google_grpc straight to target_uri.
type grpcTarget struct {
	name           string // what Envoy names in its logs
	authority      string
	connectTimeout time.Duration
	maxRecv        int
	dial           func(ctx context.Context) (net.Conn, error)
	creds          func() (credentials.TransportCredentials, error)
	md             func() (metadata.MD, error)
	backoffBase    time.Duration
	backoffMax     time.Duration
	viaRouter      bool // envoy_grpc: Envoy's router (and its debug header dump)
}

var errNoHealthyUpstream = errors.New("no healthy upstream")

func newGRPCTarget(s *server, gs *corev3.GrpcService) (*grpcTarget, error) {
	t := &grpcTarget{backoffBase: 500 * time.Millisecond, backoffMax: 30 * time.Second}
	initial := gs.GetInitialMetadata()
	staticMD := func() metadata.MD {
		md := metadata.MD{}
		for _, h := range initial {
			md.Append(strings.ToLower(h.GetKey()), h.GetValue())
		}
		return md
	}
	if eg := gs.GetEnvoyGrpc(); eg != nil {
		var cluster *clusterv3.Cluster
		for _, c := range s.staticClusters {
			if c.GetName() == eg.GetClusterName() {
				cluster = c
			}
		}
		if cluster == nil {
			return nil, fmt.Errorf("Unknown gRPC client cluster '%s'", eg.GetClusterName())
		}
		t.name = eg.GetClusterName()
		t.viaRouter = true
		t.authority = eg.GetAuthority()
		if t.authority == "" {
			t.authority = eg.GetClusterName()
		}
		t.maxRecv = math.MaxInt32
		if m := eg.GetMaxReceiveMessageLength(); m != nil && m.GetValue() > 0 {
			t.maxRecv = int(m.GetValue())
		}
		if rb := eg.GetRetryPolicy().GetRetryBackOff(); rb != nil {
			if rb.GetBaseInterval() != nil {
				t.backoffBase = rb.GetBaseInterval().AsDuration()
			}
			if rb.GetMaxInterval() != nil {
				t.backoffMax = rb.GetMaxInterval().AsDuration()
			} else {
				t.backoffMax = 10 * t.backoffBase
			}
		}
		t.connectTimeout = 5 * time.Second
		if ct := cluster.GetConnectTimeout(); ct != nil {
			t.connectTimeout = ct.AsDuration()
		}
		t.dial = clusterDialer(cluster, t.connectTimeout)
		t.creds = func() (credentials.TransportCredentials, error) { return clusterCreds(s, cluster) }
		t.md = func() (metadata.MD, error) { return staticMD(), nil }
		return t, nil
	}
	gg := gs.GetGoogleGrpc()
	if gg == nil {
		return nil, errors.New("Unsupported gRPC service: neither envoy_grpc nor google_grpc is set")
	}
	t.name = gg.GetTargetUri()
	network, addr := parseTargetURI(gg.GetTargetUri())
	t.authority = addr
	t.connectTimeout = 20 * time.Second
	t.maxRecv = 4 << 20
	// gRPC verifies the server against the authority's host unless
	// grpc.ssl_target_name_override says otherwise.
	serverName := ""
	for k, v := range gg.GetChannelArgs().GetArgs() {
		switch k {
		case "grpc.max_receive_message_length":
			if v.GetIntValue() > 0 {
				t.maxRecv = int(v.GetIntValue())
			}
		case "grpc.ssl_target_name_override":
			serverName = v.GetStringValue()
			t.authority = serverName
		case "grpc.default_authority":
			t.authority = v.GetStringValue()
		}
	}
	t.dial = func(ctx context.Context) (net.Conn, error) {
		d := net.Dialer{Timeout: t.connectTimeout}
		return d.DialContext(ctx, network, addr)
	}
	// Envoy hands google_grpc credentials to one factory: the default one
	// (channel credentials, else insecure; access_token and friends, never
	// plugins) or file_based_metadata (TLS always; only its plugin).
	factory := gg.GetCredentialsFactoryName()
	switch factory {
	case "", "envoy.grpc_credentials.default", fileBasedMetadata, "envoy.grpc_credentials.aws_iam":
	default:
		return nil, fmt.Errorf("Unknown google grpc credentials factory: %s", factory)
	}
	fileBased := factory == fileBasedMetadata
	cc := gg.GetChannelCredentials()
	t.creds = func() (credentials.TransportCredentials, error) {
		switch {
		case cc.GetSslCredentials() != nil:
			ssl := cc.GetSslCredentials()
			cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
			if ssl.GetRootCerts() != nil {
				pem, name, err := readDataSource(ssl.GetRootCerts())
				if err != nil {
					return nil, err
				}
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					return nil, fmt.Errorf("Failed to load trusted CA certificates from %s", name)
				}
				cfg.RootCAs = pool
			}
			if ssl.GetCertChain() != nil {
				kp, err := loadKeyPair(&tlsv3.TlsCertificate{CertificateChain: ssl.GetCertChain(), PrivateKey: ssl.GetPrivateKey()})
				if err != nil {
					return nil, err
				}
				cfg.Certificates = []tls.Certificate{kp}
			}
			return credentials.NewTLS(cfg), nil
		case cc.GetGoogleDefault() != nil, fileBased:
			return credentials.NewTLS(&tls.Config{ServerName: serverName}), nil
		}
		return insecure.NewCredentials(), nil
	}
	calls := gg.GetCallCredentials()
	t.md = func() (metadata.MD, error) {
		md := staticMD()
		for _, c := range calls {
			if tok := c.GetAccessToken(); tok != "" && !fileBased {
				md.Append("authorization", "Bearer "+tok)
			}
			fp := c.GetFromPlugin()
			if !fileBased || fp == nil || fp.GetName() != fileBasedMetadata {
				continue
			}
			msg, err := unpackAny(fp.GetTypedConfig())
			if err != nil {
				return nil, err
			}
			cfg, ok := msg.(*grpccredv3.FileBasedMetadataConfig)
			if !ok {
				continue
			}
			// The plugin reads the file for every call, so rotations apply.
			data, _, err := readDataSource(cfg.GetSecretData())
			if err != nil {
				return nil, err
			}
			key := cfg.GetHeaderKey()
			if key == "" {
				key = "authorization"
			}
			md.Append(strings.ToLower(key), cfg.GetHeaderPrefix()+string(data))
		}
		return md, nil
	}
	return t, nil
}

func parseTargetURI(u string) (network, addr string) {
	switch {
	case strings.HasPrefix(u, "unix:"):
		p := strings.TrimPrefix(strings.TrimPrefix(u, "unix:"), "//")
		return "unix", p
	case strings.HasPrefix(u, "dns:///"):
		u = strings.TrimPrefix(u, "dns:///")
	case strings.HasPrefix(u, "dns:"):
		u = strings.TrimPrefix(u, "dns:")
	case strings.HasPrefix(u, "ipv4:"), strings.HasPrefix(u, "ipv6:"):
		u = u[5:]
	}
	if _, _, err := net.SplitHostPort(u); err != nil {
		u = net.JoinHostPort(u, "443")
	}
	return "tcp", u
}

// clusterDialer connects to the cluster's first endpoint, resolving it the
// way the cluster type says.
func clusterDialer(c *clusterv3.Cluster, timeout time.Duration) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var addr *corev3.Address
		for _, ep := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range ep.GetLbEndpoints() {
				if a := lb.GetEndpoint().GetAddress(); a != nil && addr == nil {
					addr = a
				}
			}
		}
		if addr == nil {
			return nil, errNoHealthyUpstream
		}
		d := net.Dialer{Timeout: timeout}
		if p := addr.GetPipe(); p != nil {
			return d.DialContext(ctx, "unix", p.GetPath())
		}
		sa := addr.GetSocketAddress()
		if sa == nil {
			return nil, errNoHealthyUpstream
		}
		port := strconv.Itoa(int(sa.GetPortValue()))
		switch c.GetType() {
		case clusterv3.Cluster_STATIC:
			return d.DialContext(ctx, "tcp", net.JoinHostPort(sa.GetAddress(), port))
		case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
			ip, err := resolve(ctx, sa.GetAddress(), c.GetDnsLookupFamily())
			if err != nil {
				return nil, errNoHealthyUpstream
			}
			return d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), port))
		}
		return nil, errNoHealthyUpstream
	}
}

func resolve(ctx context.Context, host string, fam clusterv3.Cluster_DnsLookupFamily) (netip.Addr, error) {
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	var v4, v6 []netip.Addr
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			v4 = append(v4, ip.Unmap())
		} else {
			v6 = append(v6, ip)
		}
	}
	var order [][]netip.Addr
	switch fam {
	case clusterv3.Cluster_V4_ONLY:
		order = [][]netip.Addr{v4}
	case clusterv3.Cluster_V6_ONLY:
		order = [][]netip.Addr{v6}
	case clusterv3.Cluster_V4_PREFERRED:
		order = [][]netip.Addr{v4, v6}
	case clusterv3.Cluster_ALL:
		order = [][]netip.Addr{ips}
	default: // AUTO prefers IPv6
		order = [][]netip.Addr{v6, v4}
	}
	for _, o := range order {
		if len(o) > 0 {
			return o[0], nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no address for %s", host)
}

// clusterCreds builds TLS from the cluster's transport socket per attempt,
// since SDS secrets may arrive later.
func clusterCreds(s *server, c *clusterv3.Cluster) (credentials.TransportCredentials, error) {
	ts := c.GetTransportSocket()
	if ts == nil {
		return insecure.NewCredentials(), nil
	}
	msg, err := unpackAny(ts.GetTypedConfig())
	if err != nil {
		return nil, err
	}
	utc, ok := msg.(*tlsv3.UpstreamTlsContext)
	if !ok {
		// raw_buffer and friends: plaintext.
		return insecure.NewCredentials(), nil
	}
	cfg, err := upstreamTLSConfig(utc, s.lookupSecret)
	if err != nil {
		return nil, err
	}
	return &envoyTLS{cfg: cfg}, nil
}

// envoyTLS is a client handshake with Envoy's rules: no SNI unless
// configured, verification by VerifyPeerCertificate only.
type envoyTLS struct{ cfg *tls.Config }

func (e *envoyTLS) ClientHandshake(ctx context.Context, _ string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := e.cfg.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2"}
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, credentials.TLSInfo{State: conn.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (e *envoyTLS) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("client only")
}

func (e *envoyTLS) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2"}
}

func (e *envoyTLS) Clone() credentials.TransportCredentials { return &envoyTLS{cfg: e.cfg.Clone()} }

func (e *envoyTLS) OverrideServerName(string) error { return nil }

// connect opens a fresh channel per stream attempt so reconnect timing is
// this client's backoff, not grpc-go's.
func (t *grpcTarget) connect() (*grpc.ClientConn, error) {
	creds, err := t.creds()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient("passthrough:///"+t.name,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return t.dial(ctx) }),
		grpc.WithTransportCredentials(creds),
		grpc.WithAuthority(t.authority),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: t.connectTimeout + 5*time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(t.maxRecv)),
		grpc.WithUserAgent("envoy/"+envoyVersion),
	)
}
