package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// testCP starts the test control plane with mesh payments and returns it
// with a request the agent would send.
func testCP(b *testing.B) (*controlplane.Server, []byte, *bootstrap.Request) {
	b.Helper()
	cp, err := controlplane.Start(controlplane.Options{Dir: b.TempDir(), Meshes: []string{"payments"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cp.Close() })
	ca, err := os.ReadFile(cp.CACertFile())
	if err != nil {
		b.Fatal(err)
	}
	tok, err := cp.IssueToken(controlplane.TokenRequest{Mesh: "payments", Workload: "zone-proxy-payments-egress", ValidFor: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	dp := dataplane.Render(dataplane.Spec{
		Mesh: "payments", Name: "zone-proxy-payments-egress-bench", Workload: "zone-proxy-payments-egress",
		Address: "127.0.0.1", EgressPort: 10002,
	})
	req := &bootstrap.Request{
		Mesh: dp.Mesh, Name: dp.Name, ProxyType: "dataplane", DataplaneToken: tok,
		DataplaneResource: dp.JSON(), CACert: string(ca), DynamicMetadata: map[string]string{},
		OperatingSystem: "linux", Features: []string{bootstrap.FeatureReusePort},
		Workdir: filepath.Join(b.TempDir(), "wd"), ReadinessPort: 9902,
		Version: bootstrap.Version{Envoy: bootstrap.EnvoyVersion{Version: "1.39.0", Build: "x/1.39.0/Clean/RELEASE/BoringSSL", KumaDpCompatible: true}},
	}
	return cp, ca, req
}

// A fresh client per attempt, as at start-up: TLS handshake included,
// and the test control plane's own work, which runs in this process.
func BenchmarkBootstrapRoundTrip(b *testing.B) {
	cp, ca, req := testCP(b)
	for _, tc := range []struct{ name, mesh string }{{"mesh-missing-422", "absent"}, {"bootstrap-200", "payments"}} {
		b.Run(tc.name, func(b *testing.B) {
			r := *req
			r.Mesh = tc.mesh
			r.DataplaneResource = strings.Replace(r.DataplaneResource, `"mesh":"payments"`, `"mesh":"`+tc.mesh+`"`, 1)
			b.ReportAllocs()
			for b.Loop() {
				c, err := bootstrap.NewClient(cp.URL(), ca)
				if err != nil {
					b.Fatal(err)
				}
				_, err = c.Fetch(context.Background(), &r)
				c.Close()
				if (tc.mesh == "payments") != (err == nil) {
					b.Fatal(err)
				}
			}
		})
	}
}

// The agent reads the admin address out of the bootstrap before it
// launches Envoy: on the start-up path.
func BenchmarkAdminFromBootstrap(b *testing.B) {
	cp, ca, req := testCP(b)
	c, err := bootstrap.NewClient(cp.URL(), ca)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := c.Fetch(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envoy.AdminFromBootstrap(doc); err != nil {
			b.Fatal(err)
		}
	}
}
