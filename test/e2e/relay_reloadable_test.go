package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// reloadableZone is a control plane with reloadable tokens on
// (KUMA_DP_SERVER_AUTHN_ENABLE_RELOADABLE_TOKENS=true), logging to cpLog.
func reloadableZone(t *testing.T) (*harness.Zone, *harness.SyncBuffer) {
	t.Helper()
	cpLog := &harness.SyncBuffer{}
	zone := harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"}, ReloadableTokens: true, Log: cpLog})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane log:\n%s", cpLog.String())
		}
	})
	return zone, cpLog
}

// connectedSince is the proxy's ADS stream, accepted and ACKed after t0.
func connectedSince(zone *harness.Zone, t0 time.Time) (controlplane.ProxyInfo, bool) {
	for _, x := range zone.CP.Proxies() {
		if x.Connected && x.ConnectedAt.After(t0) && len(x.ACKed) > 0 {
			return x, true
		}
	}
	return controlplane.ProxyInfo{}, false
}

// rotateAndBack writes a token the control plane refuses into the token
// file, makes it drop the stream, waits for the refusal, then rotates a
// good token back in: the next stream is accepted, with no restart of the
// agent or Envoy.
func rotateAndBack(t *testing.T, zone *harness.Zone, cpLog *harness.SyncBuffer, p harness.Proxy, agent *harness.Agent) {
	t.Helper()
	// HDS takes the same way and the same token.
	harness.Eventually(t, promptly, "an authenticated HDS stream", func() bool {
		return strings.Contains(cpLog.String(), "hds: stream opened node=payments.")
	})
	envoyPID := agent.EnvoyPID(promptly)
	good := swapInRefusedToken(t, zone, p)
	harness.Eventually(t, promptly, "the control plane to refuse the rotated token", func() bool {
		return strings.Contains(cpLog.String(), `is not allowed with this token. Allowed workload in token is "someone-else"`)
	})

	rotated := time.Now()
	rotateTokenBack(t, p, good)
	harness.Eventually(t, promptly, "a new stream accepted with the good token", func() bool {
		_, ok := connectedSince(zone, rotated)
		return ok
	})
	if agent.Exited() || harness.ProcessGone(envoyPID) || agent.EnvoyPID(promptly) != envoyPID {
		t.Fatal("the agent or Envoy restarted")
	}
}

// Against a control plane with reloadable tokens the relay is still the
// one that talks to it: Envoy's bootstrap names the relay's socket, not
// the control plane, and holds neither the token nor the token file.
func TestRelayWithReloadableTokens(t *testing.T) {
	t.Parallel()
	zone, cpLog := reloadableZone(t)
	p, agent := readyWithCache(t, zone)

	recs := zone.CP.BootstrapRequests()
	if len(recs) == 0 || !strings.Contains(string(recs[len(recs)-1].Body), `"dataplaneTokenPath":"`+p.TokenFile+`"`) {
		t.Fatalf("the bootstrap request does not name the token file, so the control plane baked the token in")
	}
	tok, err := os.ReadFile(p.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(p.WorkDir, "bootstrap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	boot := string(b)
	for _, bad := range []string{strings.TrimSpace(string(tok)), "googleGrpc", "file_based_metadata", p.TokenFile, zone.CP.Addr()} {
		if strings.Contains(boot, bad) {
			t.Errorf("Envoy's bootstrap holds %q", bad)
		}
	}
	if !strings.Contains(boot, filepath.Join(p.WorkDir, "zoneproxy-xds.sock")) {
		t.Errorf("Envoy's bootstrap does not point at the relay's socket")
	}
	if strings.Contains(agent.Output(), "cannot relay Envoy's xDS") {
		t.Fatalf("the agent fell back to direct mode\n%s", agent.Output())
	}

	// Envoy got its configuration through the relay: the zone listener is up.
	// Its ACK on the registered stream may land just after the agent's log.
	harness.Eventually(t, promptly, "the control plane to see Envoy's ACKs", func() bool {
		_, ok := connectedSince(zone, time.Time{})
		return ok
	})
	c, err := harness.DialTLSHello("127.0.0.1:"+strconv.Itoa(p.Egress), controlplane.DestinationSNI("payments", "egress"))
	if err != nil {
		t.Fatalf("the zone listener is not bound: %v", err)
	}
	c.Close()

	rotateAndBack(t, zone, cpLog, p, agent)

	// The relay dialled what the control plane rendered: google_grpc with
	// the token file (kept in the cache beside the rewritten bootstrap).
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	name := ""
	for _, x := range zone.CP.Proxies() {
		name = strings.TrimPrefix(x.NodeID, "payments.")
	}
	cache, err := lkgcache.Open(lkgcache.Options{Dir: p.StateDir, Identity: lkgcache.Identity{Mesh: "payments", Name: name, Role: p.Role, ControlPlane: zone.CP.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close(context.Background())
	snap, err := cache.Usable()
	if err != nil {
		t.Fatal(err)
	}
	if up := snap.Upstream; !up.GoogleGRPC || up.TokenPath != p.TokenFile || up.Address != zone.CP.Addr() {
		t.Fatalf("the relay's upstream: google_grpc %t to %s with token file %q; want google_grpc to %s with %s",
			up.GoogleGRPC, up.Address, up.TokenPath, zone.CP.Addr(), p.TokenFile)
	}
}

// Direct mode against the same control plane: Envoy dials it with
// google_grpc and reads the token file itself for every stream, so a
// rotation applies there too.
func TestDirectModeWithReloadableTokens(t *testing.T) {
	t.Parallel()
	zone, cpLog := reloadableZone(t)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil, "--xds-relay=false")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)

	b, err := os.ReadFile(filepath.Join(p.WorkDir, "bootstrap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	boot := string(b)
	tok, err := os.ReadFile(p.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(boot, strings.TrimSpace(string(tok))) {
		t.Errorf("Envoy's bootstrap holds the token")
	}
	// (kuma-cp's bootstrap, written back as JSON with the agent build in
	// Envoy's node.)
	for _, want := range []string{`"googleGrpc"`, `"targetUri":"` + zone.CP.Addr() + `"`, `"filename":"` + p.TokenFile + `"`} {
		if !strings.Contains(boot, want) {
			t.Errorf("Envoy's bootstrap lacks %q:\n%s", want, boot)
		}
	}
	if _, err := os.Lstat(filepath.Join(p.WorkDir, "zoneproxy-xds.sock")); !os.IsNotExist(err) {
		t.Errorf("a relay socket in direct mode: %v", err)
	}
	harness.Eventually(t, promptly, "the control plane to see Envoy's ACKs", func() bool {
		_, ok := connectedSince(zone, time.Time{})
		return ok
	})

	rotateAndBack(t, zone, cpLog, p, agent)
}

// Envoy sends the file as it is, and a newline fails every stream: the
// agent says so in plain words, with the fix, before Envoy starts.
func TestDirectModeWarnsOfANewlineInTheTokenFile(t *testing.T) {
	t.Parallel()
	zone, _ := reloadableZone(t)
	p := zone.NewProxy("payments", "egress")
	tok, err := os.ReadFile(p.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.TokenFile, []byte(strings.TrimSpace(string(tok))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := zone.Start(p, nil, "--xds-relay=false")
	agent.AwaitLog("Envoy reads the dataplane token file itself", promptly)
	if strings.Contains(agent.Output(), strings.TrimSpace(string(tok))) {
		t.Error("the token is in the agent's output")
	}
}
