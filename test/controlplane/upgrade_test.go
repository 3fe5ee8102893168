package controlplane

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// expectUnimplemented fails unless the stream is refused as gRPC refuses
// a method it does not register.
func (c *sotwClient) expectUnimplemented() {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Errorf("got a %s response, want the stream refused", shortType(r.GetTypeUrl()))
	case err := <-c.errc:
		if status.Code(err) != codes.Unimplemented {
			c.t.Errorf("stream ended with %v, want Unimplemented", err)
		}
	case <-time.After(10 * time.Second):
		c.t.Error("the SotW stream was neither answered nor refused")
	}
}

// kuma-cp master 348b6528 registers SotW and never answers it.
func TestSotWNeverAnsweredOn30WhenAsked(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, SotWNeverAnswered: true})
	node, tok := egressNode(t, s, "zp-egress-1")
	dialSotW(t, s, tok, node).expectNoResponse(time.Second)
}

// Across Upgrade the bootstrap, the protocols and GET /version are the new
// release's, on the same address and CA, with the same token key; and back.
func TestUpgradeChangesTheReleaseMidRun(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, Kuma: Kuma214})
	addr := s.Addr()
	node, tok := egressNode(t, s, "zp-egress-1")
	c := dialSotW(t, s, tok, node)
	c.collect(hasAll(resourcev3.ListenerType, egressLDS))
	if _, ok := s.Dataplane("payments", "zp-egress-1"); !ok {
		t.Fatal("the SotW stream registered no Dataplane")
	}

	if err := s.Upgrade(Kuma30, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Errorf("the upgraded control plane listens on %s, want %s", s.Addr(), addr)
	}
	if _, ok := s.Dataplane("payments", "zp-egress-1"); ok {
		t.Error("the Dataplane outlived the store across the upgrade")
	}
	checkRelease(t, s, corev3.ApiConfigSource_DELTA_GRPC, `{"kuma":"3.0","version":"3.0.0","sotw":false}`)
	dialSotW(t, s, tok, node).expectUnimplemented()

	if err := s.Upgrade(Kuma214, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	checkRelease(t, s, corev3.ApiConfigSource_GRPC, `{"kuma":"2.14","version":"2.14.3","sotw":true}`)
	dialSotW(t, s, tok, node).collect(hasAll(resourcev3.ListenerType, egressLDS))

	if err := s.Upgrade("2.13", 0); err == nil {
		t.Error("Upgrade to 2.13 was accepted")
	}
}

func checkRelease(t *testing.T, s *Server, apiType corev3.ApiConfigSource_ApiType, version string) {
	t.Helper()
	body := bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener))
	if got := fetchBootstrap(t, s, "", body).GetDynamicResources().GetAdsConfig().GetApiType(); got != apiType {
		t.Errorf("bootstrap ads_config api_type %v, want %v", got, apiType)
	}
	if st, got, _ := adminDo(t, s, "GET", "/version", ""); st != 200 || got != version {
		t.Errorf("GET /version %d %s, want 200 %s", st, got, version)
	}
}
