package bootstrap

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchRequest is shaped like the agent's: a real-sized token, CA and
// Dataplane resource.
func benchRequest() *Request {
	return &Request{
		Mesh: "payments", Name: "zone-proxy-payments-egress-vm1", ProxyType: "dataplane",
		DataplaneToken:     strings.Repeat("eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ", 24),
		DataplaneTokenPath: "/etc/zoneproxy/tokens/payments-egress",
		DataplaneResource: `{"type":"Dataplane","mesh":"payments","name":"zone-proxy-payments-egress-vm1",` +
			`"labels":{"kuma.io/workload":"zone-proxy-payments-egress"},"networking":{"address":"10.0.0.5",` +
			`"listeners":[{"type":"ZoneEgress","address":"10.0.0.5","port":10002,"name":"ze-port"}]}}`,
		Version: Version{
			KumaDp: KumaDpVersion{Version: "1.0.0", GitTag: "1.0.0", GitCommit: "0123456789ab", BuildDate: "2026-01-01T00:00:00Z"},
			Envoy:  EnvoyVersion{Version: "1.39.0", Build: "50ef0945fa2c5da4bff7627c3abf41fdd3b7cffd/1.39.0/Clean/RELEASE/BoringSSL", KumaDpCompatible: true},
		},
		CACert:          string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: make([]byte, 500)})),
		DynamicMetadata: map[string]string{},
		ReadinessPort:   9902,
		OperatingSystem: "linux",
		Features:        []string{FeatureReusePort},
		Workdir:         "/run/zoneproxy/payments-egress",
		SystemCAPath:    "/etc/ssl/certs/ca-certificates.crt",
	}
}

// The request body is encoded on every attempt, so also while waiting.
func BenchmarkEncodeRequest(b *testing.B) {
	req := benchRequest()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	// About the size of a kuma-cp bootstrap for a zone proxy.
	yaml := strings.Repeat("static_resources:\n  clusters:\n  - name: ads_cluster\n    type: STRICT_DNS\n", 90)
	body := []byte(`{"bootstrap":"` + base64.StdEncoding.EncodeToString([]byte(yaml)) +
		`","kumaSidecarConfiguration":{"networking":{"address":"10.0.0.5"},"metrics":{"aggregate":{}}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClassifyMeshMissing(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if e := classifyStatus(422, `mesh: mesh "payments" does not exist`, "payments", "https://cp:5678"); e.Kind != MeshNotFound {
			b.Fatal(e)
		}
	}
}

// One waiting attempt end to end on a kept-alive TLS connection: what
// each retry costs the agent (and a loopback server) while the mesh is
// missing.
func BenchmarkFetchMeshMissing(b *testing.B) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `mesh: mesh "payments" does not exist`)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := NewClient(srv.URL, ca)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := benchRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Fetch(ctx, req); KindOf(err) != MeshNotFound {
			b.Fatal(err)
		}
	}
}
