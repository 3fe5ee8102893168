package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// What zoneproxy's maintenance drain relies on: stopped listeners refuse
// new connections, keep the accepted ones, and never come back through LDS
// (Envoy's ListenerManagerImpl skips them), so only a new process serves.
func TestStoppedListenersStayStopped(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	l1, l2 := freePort(t), freePort(t)
	clusters := []types.Resource{staticCluster("backend")}
	cp.setSnapshot(t, "v1", clusters, []types.Resource{tcpProxyListener(t, "a", l1, "backend")})
	_, sock := startWithCP(t, cp, "127.0.0.1")
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })
	held := holdConn(t, sock, l1)

	// A graceful drain, cut short by a plain one: closed at once.
	adminDo(t, sock, "POST", "/drain_listeners?graceful")
	if code, body := adminDo(t, sock, "POST", "/drain_listeners"); code != 200 || body != "OK\n" {
		t.Fatalf("drain: %d %q", code, body)
	}
	waitFor(t, 5*time.Second, "listener closed", func() bool { return !dialable(l1) })
	held.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := held.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the stop closed an accepted connection: %v", err)
	}

	// LDS sends a new listener and the old one changed: neither is opened.
	changed := tcpProxyListener(t, "a", l1, "backend")
	changed.StatPrefix = "changed"
	cp.setSnapshot(t, "v2", clusters, []types.Resource{changed, tcpProxyListener(t, "b", l2, "backend")})
	waitFor(t, 10*time.Second, "the second LDS update", func() bool {
		return statValue(t, sock, "listener_manager.lds.update_success") >= 2
	})
	if dialable(l1) || dialable(l2) {
		t.Fatal("a listener came back through LDS after the drain")
	}
}
