package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// rawBootstrap asks the test control plane for a bootstrap the way
// kuma-dp would, without the agent's code.
func rawBootstrap(t *testing.T, cp *controlplane.Server, workDir, token, listeners string) []byte {
	t.Helper()
	dp := `{"type":"Dataplane","mesh":"payments","name":"zp-1","labels":{"kuma.io/workload":"zp"},` +
		`"networking":{"address":"127.0.0.1","listeners":[` + listeners + `]}}`
	body, _ := json.Marshal(map[string]any{
		"mesh": "payments", "name": "zp-1", "proxyType": "dataplane", "dataplaneToken": token,
		"dataplaneResource": dp, "readinessPort": 9902, "workdir": workDir,
		"version": map[string]any{"envoy": map[string]any{"version": "1.39.0"}},
	})
	pem, err := os.ReadFile(cp.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest(http.MethodPost, cp.URL()+"/bootstrap", bytes.NewReader(body))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("bootstrap: %d %s", resp.StatusCode, out)
	}
	var r struct{ Bootstrap string }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	yaml, err := base64.StdEncoding.DecodeString(r.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	return yaml
}

func listenerJSON(typ string, port int, name string) string {
	return fmt.Sprintf(`{"type":%q,"address":"127.0.0.1","port":%d,"name":%q}`, typ, port, name)
}

func TestStandInValidatesTheControlPlanesBootstrap(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	tok, err := zone.CP.IssueToken(controlplane.TokenRequest{Mesh: "payments", Workload: "zp"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"egress":   listenerJSON("ZoneEgress", 10002, "ze-port"),
		"ingress":  listenerJSON("ZoneIngress", 10001, "zi-port"),
		"combined": listenerJSON("ZoneIngress", 10001, "zi-port") + "," + listenerJSON("ZoneEgress", 10002, "ze-port"),
	}
	for role, listeners := range cases {
		t.Run(role, func(t *testing.T) {
			dir := harness.ShortTempDir(t)
			path := filepath.Join(dir, "bootstrap.yaml")
			doc := rawBootstrap(t, zone.CP, dir, tok, listeners)
			if err := os.WriteFile(path, doc, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bins.Envoy, "--mode", "validate", "-c", path).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "OK") {
				t.Fatalf("stand-in rejects the control plane's bootstrap: %v\n%s", err, out)
			}
			// Strictness: a field Envoy does not know fails, as in Envoy.
			bad := filepath.Join(dir, "bad.yaml")
			_ = os.WriteFile(bad, append(append([]byte{}, doc...), []byte("notAnEnvoyField: 1\n")...), 0o600)
			if out, err := exec.Command(bins.Envoy, "--mode", "validate", "-c", bad).CombinedOutput(); err == nil {
				t.Fatalf("stand-in accepted an unknown field:\n%s", out)
			}
		})
	}
}

func TestADSRejectsABadTokenSoEnvoyNeverGoesLive(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	dir := harness.ShortTempDir(t)
	path := filepath.Join(dir, "bootstrap.yaml")
	doc := rawBootstrap(t, zone.CP, dir, "not-a-real-token", listenerJSON("ZoneEgress", harness.FreePort(t), "ze-port"))
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	envoy := exec.Command(bins.Envoy, "-c", path, "--log-level", "info")
	mu := &harness.SyncBuffer{}
	envoy.Stdout, envoy.Stderr = mu, mu
	if err := envoy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = envoy.Process.Kill(); _ = envoy.Wait() }()
	harness.Eventually(t, promptly, "the ADS stream to be refused", func() bool {
		return strings.Contains(mu.String(), "authentication failed")
	})
	admin := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return net.Dial("unix", filepath.Join(dir, "kuma-envoy-admin.sock"))
	}}}
	resp, err := admin.Get("http://envoy/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatal("Envoy went LIVE with a rejected token")
	}
	for _, px := range zone.CP.Proxies() {
		if len(px.ACKed) > 0 {
			t.Fatalf("control plane served a proxy with a bad token: %+v", px)
		}
	}
}
