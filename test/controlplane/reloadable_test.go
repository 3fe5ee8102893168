package controlplane

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpccredv3 "github.com/envoyproxy/go-control-plane/envoy/config/grpc_credential/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// wantGoogleGRPC is kuma-cp's reloadable-token service, written out by hand
// (generator.default-config-token-path.golden.yaml plus the 4 MiB limit).
func wantGoogleGRPC(target, tokenPath string, caPEM []byte) *corev3.GrpcService_GoogleGrpc {
	arg := func(n int64) *corev3.GrpcService_GoogleGrpc_ChannelArgs_Value {
		return &corev3.GrpcService_GoogleGrpc_ChannelArgs_Value{ValueSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelArgs_Value_IntValue{IntValue: n}}
	}
	return &corev3.GrpcService_GoogleGrpc{
		TargetUri:              target,
		StatPrefix:             "ads",
		CredentialsFactoryName: "envoy.grpc_credentials.file_based_metadata",
		CallCredentials: []*corev3.GrpcService_GoogleGrpc_CallCredentials{{
			CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_CallCredentials_FromPlugin{
				FromPlugin: &corev3.GrpcService_GoogleGrpc_CallCredentials_MetadataCredentialsFromPlugin{
					Name: "envoy.grpc_credentials.file_based_metadata",
					ConfigType: &corev3.GrpcService_GoogleGrpc_CallCredentials_MetadataCredentialsFromPlugin_TypedConfig{
						TypedConfig: mustAny(&grpccredv3.FileBasedMetadataConfig{
							SecretData: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: tokenPath}},
						}),
					},
				},
			},
		}},
		ChannelCredentials: &corev3.GrpcService_GoogleGrpc_ChannelCredentials{
			CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelCredentials_SslCredentials{SslCredentials: &corev3.GrpcService_GoogleGrpc_SslCredentials{
				RootCerts: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: caPEM}},
			}},
		},
		ChannelArgs: &corev3.GrpcService_GoogleGrpc_ChannelArgs{Args: map[string]*corev3.GrpcService_GoogleGrpc_ChannelArgs_Value{
			"grpc.keepalive_time_ms":            arg(10000),
			"grpc.keepalive_timeout_ms":         arg(30000),
			"grpc.http2.max_pings_without_data": arg(0),
			"grpc.max_receive_message_length":   arg(4194304),
		}},
	}
}

func rawBootstrap(t *testing.T, s *Server, body map[string]any) string {
	t.Helper()
	r := post(t, httpClient(t, s, true), s.URL()+"/bootstrap", mustJSON(t, body), "")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	return string(r.body)
}

func TestBootstrapWithReloadableTokens(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, ReloadableTokens: true})
	caPEM, err := os.ReadFile(s.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	res := dpJSON(t, "payments", "zp", "zp-egress", egressListener)
	port := strconv.Itoa(int(s.port()))

	checkGoogle := func(t *testing.T, host string, body map[string]any, ca []byte) {
		t.Helper()
		b := fetchBootstrap(t, s, host, body)
		want := wantGoogleGRPC(net.JoinHostPort(host, port), "/tmp/zp-work/zp", ca)
		for name, src := range map[string]*corev3.ApiConfigSource{"ads": b.GetDynamicResources().GetAdsConfig(), "hds": b.GetHdsConfig()} {
			gs := src.GetGrpcServices()
			if len(gs) != 1 {
				t.Fatalf("%s grpc services %v", name, gs)
			}
			if len(gs[0].GetInitialMetadata()) != 0 {
				t.Errorf("%s carries initial metadata %v", name, gs[0].GetInitialMetadata())
			}
			if got := gs[0].GetGoogleGrpc(); !proto.Equal(want, got) {
				t.Errorf("%s google_grpc\n got %s\nwant %s", name, protojson.Format(got), protojson.Format(want))
			}
		}
		if b.GetDynamicResources().GetAdsConfig().GetApiType() != corev3.ApiConfigSource_DELTA_GRPC {
			t.Errorf("ads api type %v", b.GetDynamicResources().GetAdsConfig().GetApiType())
		}
		var names []string
		for _, c := range b.GetStaticResources().GetClusters() {
			names = append(names, c.GetName())
		}
		if len(names) != 1 || names[0] != "system_access_log_sink" {
			t.Errorf("static clusters %v, want only system_access_log_sink (no system_ads)", names)
		}
		if sec := b.GetStaticResources().GetSecrets(); len(sec) != 1 || sec[0].GetName() != "cp_validation_ctx" {
			t.Errorf("secrets %v; kuma-cp keeps cp_validation_ctx", sec)
		}
	}

	t.Run("token and path: google_grpc reads the file, the token is nowhere", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "the-secret-token", res)
		checkGoogle(t, "127.0.0.1", body, caPEM)
		if y := rawBootstrap(t, s, body); strings.Contains(y, "the-secret-token") {
			t.Errorf("the bootstrap holds the token")
		}
	})
	t.Run("path only", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "x", res)
		delete(body, "dataplaneToken")
		checkGoogle(t, "127.0.0.1", body, caPEM)
	})
	t.Run("a host name is the target", func(t *testing.T) {
		checkGoogle(t, "localhost", bootstrapBody("payments", "zp", "tok", res), caPEM)
	})
	t.Run("caCert from the request is the root", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "tok", res)
		body["caCert"] = string(caPEM) + "\n"
		checkGoogle(t, "127.0.0.1", body, append(append([]byte{}, caPEM...), '\n'))
	})
	t.Run("no path: the token is baked in, as without reloadable tokens", func(t *testing.T) {
		body := bootstrapBody("payments", "zp", "tok", res)
		delete(body, "dataplaneTokenPath")
		b := fetchBootstrap(t, s, "", body)
		for _, src := range []*corev3.ApiConfigSource{b.GetDynamicResources().GetAdsConfig(), b.GetHdsConfig()} {
			gs := src.GetGrpcServices()[0]
			if gs.GetEnvoyGrpc().GetClusterName() != "system_ads" || gs.GetGoogleGrpc() != nil {
				t.Errorf("grpc service %v", gs)
			}
			if im := gs.GetInitialMetadata(); len(im) != 1 || im[0].GetKey() != "authorization" || im[0].GetValue() != "tok" {
				t.Errorf("initial metadata %v", im)
			}
		}
		if clusterByName(b, "system_ads") == nil {
			t.Errorf("no system_ads cluster")
		}
	})
}

// Off (the Universal default), a token path changes nothing.
func TestBootstrapWithoutReloadableTokensIgnoresThePath(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
	y := rawBootstrap(t, s, body)
	if strings.Contains(y, "googleGrpc") || strings.Contains(y, "/tmp/zp-work/zp\n") {
		t.Errorf("reloadable-token shape without the setting:\n%s", y)
	}
	if clusterByName(fetchBootstrap(t, s, "", body), "system_ads") == nil {
		t.Errorf("no system_ads cluster")
	}
}

// kuma-cp authenticates the stream's authorization metadata whatever the
// setting: the plugin only changes where Envoy reads it from.
func TestADSWithReloadableTokensStillChecksTheToken(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, ReloadableTokens: true})
	node := nodeFor(t, s, dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener), nil)
	wrong, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-ingress"})
	dialADS(t, s, wrong, node).expectError(codes.Unknown,
		`authentication failed: dataplane workload "zp-egress" is not allowed with this token. Allowed workload in token is "zp-ingress"`)
	dialADS(t, s, "", node).expectError(codes.Unknown,
		"authentication failed: could not parse token. "+tokenHint+": token is malformed: token contains an invalid number of segments")
	good, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-egress"})
	dialADS(t, s, good, node).collect(hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"))
}
