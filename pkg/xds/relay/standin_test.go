package relay

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/xds/bootstraprewrite"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// standIn builds the project's Envoy stand-in once.
func standIn(t *testing.T) string { return harness.StandIn(t) }

var freePort = testutil.FreePort

// runStandIn starts the stand-in on the rewritten bootstrap as the agent
// starts Envoy; stop kills it.
func runStandIn(t *testing.T, k kumaSetup) (admin *envoy.Admin, log *testutil.SyncBuffer, stop func()) {
	t.Helper()
	path := filepath.Join(filepath.Dir(k.socket), "bootstrap.yaml")
	if err := os.WriteFile(path, k.rewrite.JSON, 0o600); err != nil {
		t.Fatal(err)
	}
	adminAddr, err := envoy.AdminFromBootstrap(k.rewrite.JSON)
	if err != nil {
		t.Fatal(err)
	}
	log = &testutil.SyncBuffer{}
	cmd := exec.Command(standIn(t), envoy.Args(envoy.Options{ConfigPath: path, LogLevel: "info", Concurrency: 1})...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) }
	t.Cleanup(stop)
	admin = envoy.NewAdmin(adminAddr)
	t.Cleanup(admin.Close)
	return admin, log, stop
}

func awaitLive(t *testing.T, admin *envoy.Admin, log *testutil.SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		word, live, _ := admin.Ready(context.Background())
		if live {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Envoy is %q, not LIVE; its log:\n%s", word, log.String())
		}
		time.Sleep(20 * time.Millisecond) // Envoy's /ready has no change notification
	}
}

// The stand-in, started on the rewritten bootstrap, gets its zone listener
// through the relay; the control plane sees the proxy connected.
func TestStandInEnvoyGetsItsListenersThroughTheRelay(t *testing.T) {
	k := kumaBootstrapAt(t, "127.0.0.1", freePort(t))
	ev := newEvents()
	k.relay(t, k.token, ev)
	admin, log, _ := runStandIn(t, k)
	ev.await(t, "Envoy's listener ACK", func(e *events) bool {
		return slices.ContainsFunc(e.accepts, func(a Acceptance) bool { return a.TypeURL == listenerType && !a.FromCache })
	})
	awaitLive(t, admin, log)
	k.awaitProxy(t, "connected with its listeners ACKed", func(p controlplane.ProxyInfo) bool {
		return p.Connected && slices.Contains(p.ACKed, listenerType)
	})
}

// The outage story with the stand-in: ready once; the control
// plane goes away; agent and Envoy restart; Envoy is LIVE on the cached
// configuration; the control plane returns and Envoy resynchronises.
func TestStandInRestartsOnTheCacheWhileTheControlPlaneIsDown(t *testing.T) {
	k := kumaBootstrapAt(t, "127.0.0.1", freePort(t))
	stateDir := t.TempDir()
	cache1 := openCache(t, stateDir)
	cache1.SetBootstrap(k.rewrite.JSON, k.rewrite.Upstream)
	ev1 := newEvents()
	r1 := k.relay(t, k.token, ev1, func(o *Options) { o.Cache = cache1 })
	admin, log, stop := runStandIn(t, k)
	awaitLive(t, admin, log)
	ev1.await(t, "the listener ACK", func(e *events) bool {
		return slices.ContainsFunc(e.accepts, func(a Acceptance) bool { return a.TypeURL == listenerType })
	})

	k.cp.SetFaults(controlplane.Faults{RefuseConnections: true})
	stop()
	r1.Close()
	if err := cache1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	cache2 := openCache(t, stateDir)
	snap, err := cache2.Usable()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Bootstrap, k.rewrite.JSON) || bytes.Contains(lkgcache.Encode(snap), []byte(k.token)) {
		t.Fatal("the cache lacks the tokenless bootstrap, or holds the token")
	}
	// The restarted agent has only the cache: bootstrap and upstream come from it.
	k.rewrite = &bootstraprewrite.Result{JSON: snap.Bootstrap, Upstream: snap.Upstream}
	ev := newEvents()
	k.relay(t, k.token, ev, func(o *Options) { o.Cache = cache2 })
	admin, log, _ = runStandIn(t, k)
	awaitLive(t, admin, log)
	ev.await(t, "the cached configuration in use", func(e *events) bool { return len(e.cache) == 1 && e.cache[0].InUse })

	k.cp.SetFaults(controlplane.Faults{})
	ev.await(t, "the cached state to clear", func(e *events) bool { return len(e.cache) >= 2 && !e.cache[len(e.cache)-1].InUse })
	awaitLive(t, admin, log)
}
