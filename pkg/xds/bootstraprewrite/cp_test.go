package bootstraprewrite

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// cpBootstrap is what the test control plane answered for one role.
type cpBootstrap struct {
	yaml    []byte
	token   string
	cpAddr  string
	caPEM   []byte
	workDir string
}

// fetchBootstrap asks the test control plane for a real-shaped bootstrap.
func fetchBootstrap(t testing.TB, role config.Role) cpBootstrap {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{Dir: t.TempDir(), Meshes: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Close() })
	cfg := &config.Config{Mesh: "default", Role: role, Address: "192.0.2.10",
		IngressPort: 10001, EgressPort: 10002, AdminPort: 9901}
	cfg.Complete(config.Host{Hostname: "vm1"})
	token, err := cp.IssueToken(controlplane.TokenRequest{Mesh: "default", Name: cfg.Name})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(cp.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	client, err := bootstrap.NewClient(cp.URL(), caPEM)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	wd := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	doc, err := client.Fetch(ctx, &bootstrap.Request{
		Mesh: cfg.Mesh, Name: cfg.Name, ProxyType: "dataplane",
		DataplaneToken: token, DataplaneResource: cfg.Dataplane().JSON(),
		Version: bootstrap.Version{Envoy: bootstrap.EnvoyVersion{Version: "1.39.0", KumaDpCompatible: true}},
		Workdir: wd, Features: []string{bootstrap.FeatureReusePort},
	})
	if err != nil {
		t.Fatalf("bootstrap from the test control plane: %v", err)
	}
	return cpBootstrap{yaml: doc, token: token, cpAddr: cp.Addr(), caPEM: caPEM, workDir: wd}
}

// asReloadable turns a bootstrap into what kuma-cp renders with reloadable
// tokens: google_grpc with the file-based token plugin and no system_ads
// cluster (kuma's generator.default-config-token-path golden file).
func asReloadable(t *testing.T, b cpBootstrap, tokenPath string) []byte {
	t.Helper()
	root := parseTree(t, b.yaml)
	type object = map[string]any
	google := func() object {
		return object{"googleGrpc": object{
			"targetUri": b.cpAddr, "statPrefix": "ads",
			"credentialsFactoryName": fileBasedMetadata,
			"callCredentials": []any{object{"fromPlugin": object{
				"name": fileBasedMetadata,
				"typedConfig": object{
					"@type":      "type.googleapis.com/envoy.config.grpc_credential.v3.FileBasedMetadataConfig",
					"secretData": object{"filename": tokenPath},
				},
			}}},
			"channelCredentials": object{"sslCredentials": object{"rootCerts": object{
				"inlineBytes": base64.StdEncoding.EncodeToString(b.caPEM),
			}}},
			"channelArgs": object{"args": object{
				"grpc.http2.max_pings_without_data": object{"intValue": "0"},
				"grpc.keepalive_time_ms":            object{"intValue": "10000"},
				"grpc.keepalive_timeout_ms":         object{"intValue": "30000"},
				"grpc.max_receive_message_length":   object{"intValue": "4194304"},
			}},
		}}
	}
	root.obj("dynamicResources", "adsConfig")["grpcServices"] = []any{google()}
	root.obj("hdsConfig")["grpcServices"] = []any{google()}
	dropRelayCluster(root)
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// standIn builds the project's Envoy stand-in once.
func standIn(t *testing.T) string { return harness.StandIn(t) }

// validateWithStandIn returns the stand-in's verdict on doc ("" when OK).
func validateWithStandIn(t *testing.T, doc []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bootstrap.yaml")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(standIn(t), "--mode", "validate", "-c", path).CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(out))
	}
	return ""
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}
