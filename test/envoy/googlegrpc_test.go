package main

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// googleGrpcBootstrap writes kuma's reloadable-token ADS service (the
// file-based plugin reading tokenFile) with the given credentials factory.
func googleGrpcBootstrap(t *testing.T, cp *testCP, caPEM []byte, factory, tokenFile string) (path, sock string) {
	t.Helper()
	dir := shortTempDir(t)
	sock = filepath.Join(dir, "admin.sock")
	factoryLine := ""
	if factory != "" {
		factoryLine = "credentialsFactoryName: " + factory
	}
	boot := fmt.Sprintf(`
node: {id: payments.zp-egress-1, cluster: zp-egress}
admin: {address: {pipe: {path: %s, mode: 384}}}
dynamicResources:
  adsConfig:
    apiType: DELTA_GRPC
    transportApiVersion: V3
    setNodeOnFirstMessageOnly: true
    grpcServices:
    - googleGrpc:
        targetUri: %s
        statPrefix: ads
        %s
        callCredentials:
        - fromPlugin:
            name: envoy.grpc_credentials.file_based_metadata
            typedConfig:
              '@type': type.googleapis.com/envoy.config.grpc_credential.v3.FileBasedMetadataConfig
              secretData: {filename: %s}
        channelCredentials:
          sslCredentials:
            rootCerts: {inlineBytes: %s}
  cdsConfig: {ads: {}, initialFetchTimeout: 0s, resourceApiVersion: V3}
  ldsConfig: {ads: {}, initialFetchTimeout: 0s, resourceApiVersion: V3}
`, sock, cp.addr, factoryLine, tokenFile, base64.StdEncoding.EncodeToString(caPEM))
	path = filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(path, []byte(boot), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, sock
}

// tokenFileCP starts a control plane that accepts "token-one" and serves
// the backend cluster, and writes that token to a file.
func tokenFileCP(t *testing.T) (*pki, *testCP, string) {
	t.Helper()
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newCP(t, p, "token-one")
	cp.start("127.0.0.1:0")
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, nil)
	tokenFile := filepath.Join(shortTempDir(t), "token")
	if err := os.WriteFile(tokenFile, []byte("token-one"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, cp, tokenFile
}

// With reloadable tokens Kuma renders google_grpc with the file-based
// metadata plugin; a new stream picks up a rotated token file.
func TestGoogleGrpcFileBasedToken(t *testing.T) {
	p, cp, tokenFile := tokenFileCP(t)
	path, sock := googleGrpcBootstrap(t, cp, p.caPEM, "envoy.grpc_credentials.file_based_metadata", tokenFile)
	startEnvoy(t, nil, standardArgs(path)...)
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })

	addr := cp.addr
	cp.grpc.Stop()
	waitFor(t, 5*time.Second, "connected_state 0", func() bool { return statValue(t, sock, "control_plane.connected_state") == 0 })
	os.WriteFile(tokenFile, []byte("token-two"), 0o600)
	cp2 := &testCP{t: t, pki: p, cache: cp.cache, acks: map[string]int{}, token: "token-two"}
	cp2.start(addr)
	waitFor(t, 15*time.Second, "reconnect with the rotated token", func() bool { return cp2.streamCount() >= 1 })
	waitFor(t, 5*time.Second, "connected_state 1", func() bool { return statValue(t, sock, "control_plane.connected_state") == 1 })
}

// Envoy applies plugin call credentials only through the factory named by
// credentials_factory_name; the default factory ignores them, so without
// the name no token is sent.
func TestGoogleGrpcPluginNeedsItsFactory(t *testing.T) {
	p, cp, tokenFile := tokenFileCP(t)

	t.Run("unknown factory: Envoy does not start", func(t *testing.T) {
		path, _ := googleGrpcBootstrap(t, cp, p.caPEM, "envoy.grpc_credentials.nope", tokenFile)
		_, stderr, code := runEnvoy(t, nil, standardArgs(path)...)
		if code != 1 || !strings.Contains(stderr, "Unknown google grpc credentials factory: envoy.grpc_credentials.nope") {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
	})
	t.Run("no factory name: the plugin is ignored", func(t *testing.T) {
		path, sock := googleGrpcBootstrap(t, cp, p.caPEM, "", tokenFile)
		proc := startEnvoy(t, nil, standardArgs(path)...)
		waitFor(t, 10*time.Second, "two refused streams", func() bool {
			return strings.Count(proc.stderr.String(), "authentication failed: bad token") >= 2
		})
		if v := statValue(t, sock, "control_plane.connected_state"); v != 0 {
			t.Fatalf("connected_state = %d", v)
		}
	})
	t.Run("the token file is missing: the call fails, Envoy retries", func(t *testing.T) {
		path, sock := googleGrpcBootstrap(t, cp, p.caPEM, "envoy.grpc_credentials.file_based_metadata", tokenFile+".missing")
		proc := startEnvoy(t, nil, standardArgs(path)...)
		waitFor(t, 10*time.Second, "the plugin failure", func() bool {
			return strings.Contains(proc.stderr.String(), "Getting metadata from plugin failed with error: ")
		})
		if err := os.WriteFile(tokenFile+".missing", []byte("token-one"), 0o600); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 15*time.Second, "connected once the file exists", func() bool {
			return statValue(t, sock, "control_plane.connected_state") == 1
		})
	})
}
