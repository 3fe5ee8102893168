package controlplane

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// kuma-cp 2.14.3's bootstrap (template_v3.go at v2.14.3) beside 3.0's: the
// ADS type, the ADS and access log clusters' names, the Kafka stats tags.
func TestBootstrapPerKumaRelease(t *testing.T) {
	tests := []struct {
		kuma, name     string
		features       []string
		apiType        corev3.ApiConfigSource_ApiType
		ads, accessLog string
		tags           int
	}{
		{Kuma30, "3.0: delta always", []string{"feature-reuse-port"}, corev3.ApiConfigSource_DELTA_GRPC, "system_ads", "system_access_log_sink", 4},
		{Kuma214, "2.14: SotW and the legacy cluster names", []string{"feature-reuse-port"}, corev3.ApiConfigSource_GRPC, "ads_cluster", "access_log_sink", 6},
		{Kuma214, "2.14: delta when advertised", []string{"feature-delta-grpc"}, corev3.ApiConfigSource_DELTA_GRPC, "ads_cluster", "access_log_sink", 6},
		{Kuma214, "2.14: system names with unified naming", []string{"feature-unified-resource-naming"}, corev3.ApiConfigSource_GRPC, "system_ads", "system_access_log_sink", 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: tc.kuma})
			body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
			body["features"] = tc.features
			b := fetchBootstrap(t, s, "", body)
			ads := b.GetDynamicResources().GetAdsConfig()
			if ads.GetApiType() != tc.apiType {
				t.Errorf("ads_config api_type %v, want %v", ads.GetApiType(), tc.apiType)
			}
			if got := ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName(); got != tc.ads {
				t.Errorf("ADS cluster %q, want %q", got, tc.ads)
			}
			hds := b.GetHdsConfig()
			if hds.GetApiType() != corev3.ApiConfigSource_GRPC || hds.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != tc.ads {
				t.Errorf("hds_config %v, want GRPC on %s", hds, tc.ads)
			}
			if clusterByName(b, tc.ads) == nil || clusterByName(b, tc.accessLog) == nil {
				t.Errorf("static clusters lack %s or %s", tc.ads, tc.accessLog)
			}
			if got := len(b.GetStatsConfig().GetStatsTags()); got != tc.tags {
				t.Errorf("%d stats tags, want %d", got, tc.tags)
			}
		})
	}
}

func TestUnknownKumaReleaseIsRefused(t *testing.T) {
	_, err := Start(Options{Dir: t.TempDir(), Kuma: "2.13"})
	if err == nil || err.Error() != `controlplane: Options.Kuma "2.13" is not a modelled release: use "3.0" or "2.14"` {
		t.Errorf("Start with Kuma 2.13: %v", err)
	}
}

func TestAdminVersionNamesTheModelledRelease(t *testing.T) {
	for _, tc := range []struct{ kuma, want string }{
		{"", `{"kuma":"3.0","version":"3.0.0","sotw":false}`},
		{Kuma214, `{"kuma":"2.14","version":"2.14.3","sotw":true}`},
	} {
		s := startTestServer(t, Options{Kuma: tc.kuma})
		if st, body, _ := adminDo(t, s, "GET", "/version", ""); st != 200 || body != tc.want {
			t.Errorf("Kuma %q: GET /version %d %s, want 200 %s", tc.kuma, st, body, tc.want)
		}
	}
}
