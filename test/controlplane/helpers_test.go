package controlplane

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// Lifecycle timings of startTestServer for the Options left zero: kuma-cp's
// ratios, shorter still than harness.FastLifecycle.
const (
	testDeregistrationDelay = 300 * time.Millisecond
	testCacheExpiration     = 50 * time.Millisecond
	testEgressPropagation   = 100 * time.Millisecond
)

// startTestServer starts a CP with a fresh dir; logs go to t.Log.
func startTestServer(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.DeregistrationDelay == 0 {
		opts.DeregistrationDelay = testDeregistrationDelay
	}
	if opts.CacheExpiration == 0 {
		opts.CacheExpiration = testCacheExpiration
	}
	if opts.EgressPropagation == 0 {
		opts.EgressPropagation = testEgressPropagation
	}
	if opts.Log == nil {
		opts.Log = testLogWriter{t}
	}
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func caPool(t *testing.T, s *Server) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(s.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA in ca.pem")
	}
	return pool
}

// httpClient trusts the CP's CA; h2 selects HTTP/2 (ALPN) or HTTP/1.1.
func httpClient(t *testing.T, s *Server, h2 bool) *http.Client {
	t.Helper()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: caPool(t, s), MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to url with the kuma-dp headers unless accept is "".
func post(t *testing.T, c *http.Client, url string, body []byte, accept string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// listener and dpJSON build Dataplane resources like kuma-dp renders them.
type listener struct {
	Type    string `json:"type,omitempty"`
	Address string `json:"address,omitempty"`
	Port    int    `json:"port,omitempty"`
	Name    string `json:"name,omitempty"`
	State   string `json:"state,omitempty"`
}

func dpJSON(t *testing.T, mesh, name, workload string, listeners ...listener) string {
	t.Helper()
	labels := map[string]string{}
	if workload != "" {
		labels["kuma.io/workload"] = workload
	}
	m := map[string]any{
		"type":             "Dataplane",
		"mesh":             mesh,
		"name":             name,
		"creationTime":     "0001-01-01T00:00:00Z",
		"modificationTime": "0001-01-01T00:00:00Z",
		"labels":           labels,
		"kri":              "kri_dp_" + mesh + "___" + name + "_",
		"networking": map[string]any{
			"address":   "127.0.0.1",
			"listeners": listeners,
		},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	egressListener  = listener{Type: "ZoneEgress", Address: "127.0.0.1", Port: 10002, Name: "ze-port"}
	ingressListener = listener{Type: "ZoneIngress", Address: "127.0.0.1", Port: 10001, Name: "zi-port"}
)

// bootstrapBody is a kuma-dp-shaped request; edit the map to vary it.
func bootstrapBody(mesh, name, token, resource string) map[string]any {
	m := map[string]any{
		"mesh":      mesh,
		"name":      name,
		"proxyType": "dataplane",
		"version": map[string]any{
			"kumaDp": map[string]any{"version": "0.1.0", "gitTag": "v0.1.0", "gitCommit": "abc", "buildDate": "2026-01-01"},
			"envoy":  map[string]any{"version": "1.39.0", "build": "hash/1.39.0/Clean/RELEASE/BoringSSL", "kumaDpCompatible": true},
		},
		"caCert":           "",
		"dynamicMetadata":  map[string]any{},
		"dnsPort":          15053,
		"readinessPort":    9902,
		"operatingSystem":  "linux",
		"features":         []string{"feature-reuse-port"},
		"resources":        map[string]any{"maxHeapSizeBytes": 0},
		"workdir":          "/tmp/zp-work",
		"metricsResources": map[string]any{"certPath": "", "keyPath": ""},
		"systemCaPath":     "/etc/ssl/certs/ca-certificates.crt",
		"ipv6Enabled":      false,
		"spireResources":   map[string]any{"socketPath": ""},
	}
	if token != "" {
		m["dataplaneToken"] = token
		m["dataplaneTokenPath"] = "/tmp/zp-work/" + name
	}
	if resource != "" {
		m["dataplaneResource"] = resource
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, what, cond)
}
