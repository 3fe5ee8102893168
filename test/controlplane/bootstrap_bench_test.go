package controlplane

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkBootstrapHandler is the control plane's own work per
// /bootstrap request (no TLS, no HTTP/2): what every start-up figure pays.
func BenchmarkBootstrapHandler(b *testing.B) {
	s, err := Start(Options{Dir: b.TempDir(), Meshes: []string{"payments"}, Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	dp, _ := json.Marshal(map[string]any{
		"type": "Dataplane", "mesh": "payments", "name": "zp-egress-1",
		"labels":     map[string]string{"kuma.io/workload": "zp-egress"},
		"networking": map[string]any{"address": "127.0.0.1", "listeners": []listener{egressListener}},
	})
	body, _ := json.Marshal(bootstrapBody("payments", "zp-egress-1", "not-a-real-token", string(dp)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "https://127.0.0.1/bootstrap", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.handleBootstrap(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
