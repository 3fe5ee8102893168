package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// cacheFile is where the agent keeps the last-known-good configuration.
func cacheFile(p harness.Proxy) string { return filepath.Join(p.StateDir, "xds", "xds-lkg") }

// readyWithCache starts an egress and waits until it is READY and its
// configuration is cached on disk.
func readyWithCache(t *testing.T, zone *harness.Zone, extra ...string) (harness.Proxy, *harness.Agent) {
	t.Helper()
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil, extra...)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	// A first start registers the egress Ready once Envoy has its listener.
	agent.AwaitLog(egressRegisteredLog, promptly)
	harness.Eventually(t, promptly, "the configuration to be cached", func() bool {
		_, err := os.Stat(cacheFile(p))
		return err == nil
	})
	return p, agent
}

// kill ends the agent as a crash would; Envoy dies with it.
func kill(t *testing.T, agent *harness.Agent) {
	t.Helper()
	envoyPID := agent.EnvoyPID(promptly)
	agent.Signal(syscall.SIGKILL)
	agent.Wait(promptly)
	harness.Eventually(t, promptly, "Envoy to die with its agent", func() bool { return harness.ProcessGone(envoyPID) })
}

// restartDuringOutage makes the control plane unreachable, kills the
// agent and starts it again: it must be READY from the cache.
func restartDuringOutage(t *testing.T, zone *harness.Zone, p harness.Proxy, agent *harness.Agent, when string) *harness.Agent {
	t.Helper()
	zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
	kill(t, agent)
	again := zone.Start(p, nil)
	again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if code, body := readinessBody(t, p); code != 200 || !strings.Contains(body, "serving the cached configuration") {
		t.Fatalf("after %s: readiness %d %q, want READY saying the configuration is cached", when, code, body)
	}
	return again
}

func readinessBody(t *testing.T, p harness.Proxy) (int, string) {
	t.Helper()
	return tryGet("http://127.0.0.1:" + strconv.Itoa(p.Readiness) + "/ready")
}

func TestRelayKeepsTheTokenOutOfEnvoysBootstrap(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p, agent := readyWithCache(t, zone)
	tok, _ := os.ReadFile(p.TokenFile)
	for _, f := range []string{filepath.Join(p.WorkDir, "bootstrap.yaml"), cacheFile(p)} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), strings.TrimSpace(string(tok))) {
			t.Fatalf("%s holds the token", f)
		}
	}
	if fi, err := os.Stat(cacheFile(p)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file %v %v, want mode 0600", fi, err)
	}
	// The control plane authenticated the agent's stream and got Envoy's ACKs.
	// (READY says Envoy has the zone listener: the stream kuma-cp holds now
	// is the Ready registration's, resumed with what Envoy held already;
	// Envoy's ACK on it may reach the control plane just after the agent
	// logs the registration.)
	harness.Eventually(t, promptly, "the control plane to see Envoy's ACKs on the registered stream", func() bool {
		_, ok := connectedSince(zone, time.Time{})
		return ok
	})
	if _, m := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics"); !strings.Contains(m, "zoneproxy_xds_cached_config 0") {
		t.Errorf("/metrics lacks zoneproxy_xds_cached_config 0")
	}
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Lstat(filepath.Join(p.WorkDir, "zoneproxy-xds.sock")); !os.IsNotExist(err) {
		t.Fatalf("relay socket left behind: %v", err)
	}
}

// The point of the cache: a restart while the control plane is down still
// serves, and the control plane's return is picked up without a restart.
func TestRestartWhileTheControlPlaneIsDownServesFromCache(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p, agent := readyWithCache(t, zone)
	again := restartDuringOutage(t, zone, p, agent, "the first outage")
	if _, m := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics"); !strings.Contains(m, "zoneproxy_xds_cached_config 1") {
		t.Errorf("/metrics lacks zoneproxy_xds_cached_config 1")
	}
	c, err := harness.DialTLSHello("127.0.0.1:"+strconv.Itoa(p.Egress), controlplane.DestinationSNI("payments", "egress"))
	if err != nil {
		t.Fatalf("the zone listener is not bound while serving from cache: %v", err)
	}
	c.Close()

	// The control plane returns: the cached state clears, and a change made
	// there reaches Envoy, in the same agent.
	zone.CP.SetFaults(controlplane.Faults{})
	harness.Eventually(t, promptly, "the cached state to clear", func() bool {
		code, body := readinessBody(t, p)
		return code == 200 && strings.TrimSpace(body) == "READY"
	})
	name := ""
	for _, x := range zone.CP.Proxies() {
		name = strings.TrimPrefix(x.NodeID, "payments.")
	}
	port := harness.FreePort(t)
	if err := zone.CP.SetMeshMetric("payments", name, "after-outage", controlplane.MeshMetric{
		Backends: []controlplane.MetricsBackend{{Type: "Prometheus", Prometheus: &controlplane.PrometheusBackend{Port: uint32(port)}}},
	}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, promptly, "the new listener in Envoy", func() bool {
		b, err := unixGet(filepath.Join(p.WorkDir, "kuma-envoy-admin.sock"), "/listeners")
		return err == nil && strings.Contains(b, "system_meshmetric_prometheus_")
	})
	if again.Exited() {
		t.Fatal("the agent restarted")
	}
	_ = kumasock.MetricsHijacker // the listener forwards to the agent's socket

	// A second outage: the cache this agent wrote, having started from the
	// cache itself, still starts the next one, with the change in it.
	harness.Eventually(t, promptly, "the change to be cached", func() bool {
		b, err := os.ReadFile(cacheFile(p))
		return err == nil && strings.Contains(string(b), "system_meshmetric_prometheus_")
	})
	restartDuringOutage(t, zone, p, again, "a second outage")
	harness.Eventually(t, promptly, "the cached change in Envoy", func() bool {
		b, err := unixGet(filepath.Join(p.WorkDir, "kuma-envoy-admin.sock"), "/listeners")
		return err == nil && strings.Contains(b, "system_meshmetric_prometheus_")
	})
}

// The cache serves only while the control plane is unreachable, and only a
// cache made for this proxy, fresh and intact.
func TestNeverFromCache(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, zone *harness.Zone, p harness.Proxy)
		extra   []string
		// otherWorkDir restarts in another work dir: the cached bootstrap
		// points at the old one's sockets.
		otherWorkDir bool
		wantPhase    string
		wantLog      string // why the cache was not served
	}{
		{name: "the mesh is gone (422)", prepare: func(t *testing.T, zone *harness.Zone, p harness.Proxy) {
			zone.CP.DeleteMesh("payments")
		}, wantPhase: "WAITING_FOR_MESH"},
		{name: "a cache of another proxy name", prepare: func(t *testing.T, zone *harness.Zone, p harness.Proxy) {
			zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
		}, extra: []string{"--name", "another-egress"}, wantPhase: "WAITING_FOR_CONTROL_PLANE", wantLog: "made for another proxy"},
		{name: "a cache older than --cache-max-age", prepare: func(t *testing.T, zone *harness.Zone, p harness.Proxy) {
			zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
		}, extra: []string{"--cache-max-age", "1ms"}, wantPhase: "WAITING_FOR_CONTROL_PLANE", wantLog: "older than --cache-max-age"},
		{name: "a cache made in another work dir", prepare: func(t *testing.T, zone *harness.Zone, p harness.Proxy) {
			zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
		}, otherWorkDir: true, wantPhase: "WAITING_FOR_CONTROL_PLANE", wantLog: "made in another work dir"},
		{name: "an expired certificate in the cache", prepare: func(t *testing.T, zone *harness.Zone, p harness.Proxy) {
			zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
			addExpiredSecret(t, zone, p)
		}, wantPhase: "WAITING_FOR_CONTROL_PLANE", wantLog: "a certificate in the cached configuration expired"},
		{name: "a corrupt cache file", prepare: func(t *testing.T, zone *harness.Zone, p harness.Proxy) {
			zone.CP.SetFaults(controlplane.Faults{RefuseConnections: true})
			b, err := os.ReadFile(cacheFile(p))
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(cacheFile(p), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantPhase: "WAITING_FOR_CONTROL_PLANE", wantLog: "discarding a damaged xDS cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZone(t, bins, "payments")
			p, agent := readyWithCache(t, zone)
			kill(t, agent)
			tt.prepare(t, zone, p)
			if tt.otherWorkDir {
				p.WorkDir += "-2"
			}
			again := zone.Start(p, nil, tt.extra...)
			again.AwaitReadiness(p.Readiness, 503, tt.wantPhase, promptly)
			// Several attempts later it still has not started Envoy.
			again.AwaitLog(`"attempt": 3`, promptly)
			if strings.Contains(again.Output(), "started Envoy") {
				t.Fatalf("Envoy was started from the cache\n%s", again.Output())
			}
			if !strings.Contains(again.Output(), tt.wantLog) {
				t.Fatalf("the log does not say why the cache was not served (%q)\n%s", tt.wantLog, again.Output())
			}
		})
	}
}

// A refusal on the xDS stream is the reason /ready gives, in the control
// plane's words.
func TestControlPlaneRefusalOfTheStreamIsTheReason(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	zone.CP.SetFaults(controlplane.Faults{RejectADSAuth: true})
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	harness.Eventually(t, promptly, "the control plane's refusal as the reason", func() bool {
		code, body := readinessBody(t, p)
		return code == 503 && strings.Contains(body, "the control plane refused Envoy's configuration stream: ") &&
			strings.Contains(body, "authentication failed")
	})
	if _, m := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics"); !strings.Contains(m, `zoneproxy_xds_stream_errors_total{code="`) {
		t.Errorf("/metrics lacks the stream error count:\n%s", m)
	}
	zone.CP.SetFaults(controlplane.Faults{})
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
}

// The token file is read for every new stream: a rotated file applies at
// the next reconnect, without a restart.
func TestRotatedTokenAppliesAtTheNextStream(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p, agent := readyWithCache(t, zone)
	good := swapInRefusedToken(t, zone, p) // in place, not atomically
	agent.AwaitLog("is not allowed with this token", promptly)

	// Rotated back, atomically: the stream is accepted again.
	rotateTokenBack(t, p, good)
	harness.Eventually(t, promptly, "the control plane to accept the stream again", func() bool {
		for _, x := range zone.CP.Proxies() {
			if x.Connected && len(x.ACKed) > 0 {
				return true
			}
		}
		return false
	})
	if agent.Exited() {
		t.Fatal("the agent restarted")
	}
}

// A configuration Envoy rejects is logged with its type and counted.
func TestRejectedConfigurationIsLoggedAndCounted(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p, agent := namedProxy(t, zone, "payments", "egress", "zp-nack")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	// A File access log Envoy cannot open makes it reject the listener.
	if err := zone.CP.SetMeshAccessLog("payments", "zp-nack", "bad-file", controlplane.MeshAccessLog{Backends: []controlplane.AccessLogBackend{
		{Type: "File", File: &controlplane.FileAccessLogBack{Path: "/nonexistent-zoneproxy-dir/access.log"}},
	}}); err != nil {
		t.Fatal(err)
	}
	agent.AwaitLog("Envoy rejected a configuration", promptly)
	if !strings.Contains(agent.Output(), `"type": "Listener"`) {
		t.Errorf("the rejection does not name the resource type\n%s", agent.Output())
	}
	if _, m := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics"); !strings.Contains(m, `zoneproxy_xds_rejected_total{type="`) {
		t.Errorf("/metrics lacks zoneproxy_xds_rejected_total:\n%s", m)
	}
	// Envoy keeps serving its last accepted configuration.
	if code, _ := readinessBody(t, p); code != 200 {
		t.Errorf("readiness %d after a rejected update", code)
	}
}

// addExpiredSecret rewrites the proxy's cache as the agent would, with an
// SDS secret whose certificate has expired.
func addExpiredSecret(t *testing.T, zone *harness.Zone, p harness.Proxy) {
	t.Helper()
	name := ""
	for _, x := range zone.CP.Proxies() {
		name = strings.TrimPrefix(x.NodeID, p.Mesh+".")
	}
	id := lkgcache.Identity{Mesh: p.Mesh, Name: name, Role: p.Role, ControlPlane: zone.CP.URL()}
	c, err := lkgcache.Open(lkgcache.Options{Dir: p.StateDir, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Usable()
	if err != nil {
		t.Fatalf("the cache is not usable before the secret is added: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	expired := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: expired.Add(-24 * time.Hour), NotAfter: expired}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	body, err := proto.Marshal(&tlsv3.Secret{Name: "identity", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetBootstrap(snap.Bootstrap, snap.Upstream)
	c.Store(append(snap.Types, lkgcache.TypeState{TypeURL: lkgcache.SecretType, Version: "1", Resources: []lkgcache.Resource{
		{Name: "identity", Version: "1", TypeURL: lkgcache.SecretType, Body: body},
	}}))
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A control plane that refuses the token answers: that is never an outage,
// so a cached configuration is not served and the refusal is final (78).
func TestRefusedTokenIsNeverServedFromCache(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p, agent := readyWithCache(t, zone)
	kill(t, agent)
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p, "--dataplane-token-file", "")...)
	if code != 78 || !strings.Contains(out, "requires a dataplane token") {
		t.Fatalf("exit %d, want 78 for the refused token\n%s", code, out)
	}
	if strings.Contains(out, "started Envoy") {
		t.Fatalf("Envoy was started from the cache\n%s", out)
	}
}
