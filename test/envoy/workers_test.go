package main

import (
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

func TestListenerStatsPerWorker(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	cp := newTestCP(t, p, "127.0.0.1:0")
	port := freePort(t)
	cp.setSnapshot(t, "v1", []types.Resource{staticCluster("backend")}, []types.Resource{tcpProxyListener(t, "plain", port, "backend")})
	dir := shortTempDir(t)
	path := writeBootstrap(t, dir, bootstrapParams{Port: cp.port(), CA: base64.StdEncoding.EncodeToString(p.caPEM), Token: testToken})
	sock := filepath.Join(dir, "kuma-envoy-admin.sock")
	startEnvoy(t, nil, "--config-path", path, "--concurrency", "2", "--log-level", "info", "--disable-hot-restart")
	waitFor(t, 10*time.Second, "/ready LIVE", func() bool { return readyBody(sock) == "LIVE\n" })

	// Each worker has its own SO_REUSEPORT socket: the kernel picks one per
	// connection, so dial until both workers hold one.
	prefix := fmt.Sprintf("listener.127.0.0.1_%d.", port)
	workerActive := func(w int) int64 {
		return statValue(t, sock, fmt.Sprintf("%sworker_%d.downstream_cx_active", prefix, w))
	}
	n := 0
	for workerActive(0) == 0 || workerActive(1) == 0 {
		if n == 64 {
			t.Fatalf("64 connections and a worker without one: worker_0 %d, worker_1 %d", workerActive(0), workerActive(1))
		}
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		n++
		waitFor(t, 5*time.Second, "the connection counted", func() bool {
			return statValue(t, sock, prefix+"downstream_cx_active") == int64(n)
		})
	}

	// Envoy reports each listener twice: its total and per worker.
	_, text := adminDo(t, sock, "GET", "/stats?filter=downstream_cx_active$")
	var perWorker, sum int64
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		name, v, _ := strings.Cut(line, ": ")
		var n int64
		fmt.Sscan(v, &n)
		if strings.HasPrefix(name, prefix+"worker_") {
			perWorker += n
		}
		if !strings.HasPrefix(name, "listener.admin.") && strings.HasPrefix(name, "listener.") {
			sum += n
		}
	}
	for _, w := range []string{"worker_0", "worker_1"} {
		if !strings.Contains(text, prefix+w+".downstream_cx_active: ") {
			t.Errorf("no %s%s.downstream_cx_active in\n%s", prefix, w, text)
		}
	}
	if strings.Contains(text, prefix+"worker_2.") {
		t.Errorf("a third worker with --concurrency 2:\n%s", text)
	}
	if perWorker != int64(n) || sum != int64(2*n) {
		t.Errorf("per-worker sum %d (want %d), naive sum %d (want %d, twice the connections)\n%s", perWorker, n, sum, 2*n, text)
	}
	if !strings.Contains(text, "listener.admin.main_thread.downstream_cx_active: ") {
		t.Errorf("no admin main_thread stat in\n%s", text)
	}
	if v := statValue(t, sock, prefix+"downstream_pre_cx_active"); v != 0 {
		t.Errorf("downstream_pre_cx_active %d for a listener without listener filters", v)
	}

	// kuma's bootstrap adds a "worker" tag that takes "worker_<N>." out of
	// the name, so per-worker series share the listener-wide metric name.
	_, prom := adminDo(t, sock, "GET", "/stats/prometheus")
	addr := fmt.Sprintf("127.0.0.1_%d", port)
	for _, want := range []string{
		fmt.Sprintf(`envoy_listener_downstream_cx_active{envoy_listener_address=%q} %d`, addr, n),
		fmt.Sprintf(`envoy_listener_downstream_cx_active{worker="0",envoy_worker_id="0",envoy_listener_address=%q} %d`, addr, workerActive(0)),
		fmt.Sprintf(`envoy_listener_downstream_cx_total{worker="1",envoy_worker_id="1",envoy_listener_address=%q} %d`, addr, workerActive(1)),
		"envoy_listener_admin_main_thread_downstream_cx_active ",
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("/stats/prometheus lacks %s\n%s", want, prom)
		}
	}
}
