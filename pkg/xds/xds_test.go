package xds

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

const token = "secret-token-123"

// cpBootstrap is a control plane's bootstrap: ADS over TLS to cp.example
// with the token, an admin socket in the work dir.
func cpBootstrap(ca []byte) []byte {
	return []byte(`
admin:
  address: {pipe: {path: /run/zp/kuma-envoy-admin.sock}}
node: {id: default.zp, cluster: zp}
dynamicResources:
  adsConfig:
    apiType: DELTA_GRPC
    transportApiVersion: V3
    grpcServices:
    - envoyGrpc: {clusterName: ads_cluster}
      initialMetadata:
      - {key: authorization, value: ` + token + `}
      - {key: x-zone, value: east}
staticResources:
  clusters:
  - name: ads_cluster
    type: STRICT_DNS
    connectTimeout: 1s
    loadAssignment:
      clusterName: ads_cluster
      endpoints: [{lbEndpoints: [{endpoint: {address: {socketAddress: {address: cp.example, portValue: 5678}}}}]}]
    transportSocket:
      name: envoy.transport_sockets.tls
      typedConfig:
        '@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: cp.example
        commonTlsContext:
          validationContext:
            trustedCa: {inlineString: "` + strings.ReplaceAll(string(ca), "\n", `\n`) + `"}
`)
}

// noADS is a bootstrap the relay cannot take: Envoy is configured statically.
const noADS = `
admin:
  address: {socketAddress: {address: 0.0.0.0, portValue: 9901}}
node: {id: default.zp}
`

func caPEM(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// storedUpstream is what the cache keeps with the next snapshot: the
// bootstrap Envoy got and where the relay dials.
func storedUpstream(t *testing.T, c *lkgcache.Cache) *lkgcache.Snapshot {
	t.Helper()
	c.Store([]lkgcache.TypeState{{TypeURL: "type.googleapis.com/envoy.config.listener.v3.Listener", Version: "1"}})
	snap, err := c.Usable()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestStart(t *testing.T) {
	cpCA, configuredCA, thiefCA := caPEM(t, "cp"), caPEM(t, "configured"), caPEM(t, "thief")
	adminSocket := envoy.AdminAddress{Socket: "/run/zp/kuma-envoy-admin.sock"}
	// A cache file names a control plane of its own; it is not dialled.
	cachedOn := func(sock string) *Cached {
		return &Cached{snap: &lkgcache.Snapshot{WrittenAt: time.Now(),
			Bootstrap: []byte(`{"admin":{"address":{"pipe":{"path":"/run/zp/kuma-envoy-admin.sock"}}},"static":"` + sock + `"}`),
			Upstream: cpdial.Target{Address: "thief.example:443", ServerName: "thief.example", CAPEM: thiefCA,
				Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}, MaxReceiveMessageLength: 4 << 20}}}
	}
	tests := []struct {
		name    string
		relay   bool
		doc     []byte
		cached  bool
		cp      ControlPlane
		relayed bool
		admin   envoy.AdminAddress
		dialled cpdial.Target // stored with the cache, when relayed
		warned  string
		err     string // and exit 78
	}{
		{name: "from the control plane's bootstrap", relay: true, doc: cpBootstrap(cpCA), relayed: true, admin: adminSocket,
			dialled: cpdial.Target{Address: "cp.example:5678", ServerName: "cp.example", CAPEM: cpCA, HadToken: true,
				Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}}},
		{name: "from the cache: the configured control plane and CA", relay: true, cached: true,
			cp: ControlPlane{URL: "https://cp.example:5678", CAPEM: configuredCA}, relayed: true, admin: adminSocket,
			dialled: cpdial.Target{Address: "cp.example:5678", ServerName: "cp.example", CAPEM: configuredCA,
				Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}, MaxReceiveMessageLength: 4 << 20}},
		{name: "from the cache without --ca-cert-file: the system's roots, port 443", relay: true, cached: true,
			cp: ControlPlane{URL: "https://cp.example"}, relayed: true, admin: adminSocket,
			dialled: cpdial.Target{Address: "cp.example:443", ServerName: "cp.example",
				Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}, MaxReceiveMessageLength: 4 << 20}},
		{name: "from the cache, --cp-address not a URL", relay: true, cached: true, cp: ControlPlane{URL: "cp.example:5678"}, err: "--cp-address"},
		{name: "no ADS: direct, with a warning", relay: true, doc: []byte(noADS), admin: envoy.AdminAddress{TCP: "127.0.0.1:9901"},
			warned: "cannot relay Envoy's xDS"},
		{name: "not a bootstrap at all", relay: true, doc: []byte("not: [a bootstrap"), warned: "cannot relay Envoy's xDS",
			err: "the control plane's bootstrap is unusable"},
		{name: "relay off: direct", doc: cpBootstrap(cpCA), admin: adminSocket},
		{name: "no admin address", relay: true, doc: bytes.Replace(cpBootstrap(cpCA), []byte("admin:"), []byte("notadmin:"), 1),
			err: "the control plane's bootstrap is unusable: bootstrap has no admin address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sock := filepath.Join(dir, SocketName)
			cache, err := lkgcache.Open(lkgcache.Options{Dir: dir, Identity: lkgcache.Identity{Name: "zp"}})
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Close(context.Background())
			ln, err := relay.Listen(sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			handedOver := false
			core, logs := observer.New(zapcore.WarnLevel)
			o := Options{Relay: tt.relay, Bootstrap: tt.doc, SocketPath: sock, ControlPlane: tt.cp, Cache: &Cache{c: cache},
				Listener: func() (net.Listener, error) { handedOver = true; return ln, nil },
				Token:    func() (string, error) { return token, nil }, Log: zap.New(core)}
			if tt.cached {
				o.Cached = cachedOn(sock)
			}

			f, err := Start(o)
			defer f.Close()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !exitcode.IsConfig(err) {
					t.Fatalf("err = %v, want a configuration error with %q", err, tt.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if n := logs.FilterMessageSnippet(tt.warned).Len(); tt.warned != "" && n != 1 {
				t.Errorf("%d warnings %q, want 1", n, tt.warned)
			}
			if tt.relay != handedOver {
				t.Errorf("socket handed over: %v", handedOver)
			}
			_, statErr := os.Lstat(sock)
			if serving := statErr == nil; serving != tt.relayed && tt.relay {
				t.Errorf("relay socket there: %v, want %v (a socket taken and not served is closed)", serving, tt.relayed)
			}
			if err != nil {
				return
			}
			if f.Admin() != tt.admin {
				t.Errorf("admin = %+v, want %+v", f.Admin(), tt.admin)
			}
			if f.Relayed() != tt.relayed {
				t.Fatalf("relayed: %v, want %v", f.Relayed(), tt.relayed)
			}
			if !tt.relayed {
				if !bytes.Equal(f.Bootstrap(), tt.doc) {
					t.Errorf("direct mode changed the bootstrap:\n%s", f.Bootstrap())
				}
				return
			}
			if b := f.Bootstrap(); bytes.Contains(b, []byte(token)) || !bytes.Contains(b, []byte(sock)) || b[0] != '{' {
				t.Errorf("Envoy's bootstrap is not JSON pointing at the relay without the token:\n%s", b)
			}
			snap := storedUpstream(t, cache)
			if !bytes.Equal(snap.Bootstrap, f.Bootstrap()) {
				t.Errorf("the cache keeps another bootstrap than Envoy's:\n%s", snap.Bootstrap)
			}
			if !reflect.DeepEqual(snap.Upstream, tt.dialled) {
				t.Errorf("the relay dials\n%+v\nwant\n%+v", snap.Upstream, tt.dialled)
			}
		})
	}
}

// Close ends the relay and its socket; again, or on a direct or nil
// feature, it does nothing.
func TestCloseIsIdempotent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), SocketName)
	f, err := Start(Options{Relay: true, Bootstrap: cpBootstrap(caPEM(t, "cp")), SocketPath: sock, Token: func() (string, error) { return token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the relay does not serve its socket: %v", err)
	}
	f.Close()
	f.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left after Close: %v", err)
	}
	d, err := Start(Options{Bootstrap: []byte(noADS)})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d.Close()
	var none *Feature
	none.Close()
}

func TestServableOnlyInTheWorkDirItWasMadeIn(t *testing.T) {
	dir := t.TempDir()
	cache, err := lkgcache.Open(lkgcache.Options{Dir: dir, Identity: lkgcache.Identity{Name: "zp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close(context.Background())
	here := filepath.Join(dir, "work", SocketName)
	cache.SetBootstrap([]byte(`{"static":"`+here+`"}`), cpdial.Target{Address: "cp:1"})
	cache.Store(nil)
	for _, tt := range []struct {
		sock string
		want string
	}{
		{here, ""},
		{filepath.Join(dir, "other", SocketName), "made in another work dir than " + filepath.Join(dir, "other")},
	} {
		_, err := (&Cache{c: cache}).Servable(tt.sock)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.sock, err, tt.want)
		}
	}
}
