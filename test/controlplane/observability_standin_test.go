package controlplane

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
)

func freeTCPPort(t *testing.T) uint32 { return uint32(testutil.FreePort(t)) }

func httpGet(c *http.Client, url, ifNoneMatch string) (int, string, string, error) {
	req, _ := http.NewRequest("GET", url, nil)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Etag"), string(b), nil
}

// TestObservabilityThroughTheStandIn runs the Envoy stand-in on the
// bootstrap and xDS this CP generates for a zone egress with a
// MeshAccessLog and a MeshMetric, and checks what the agent would meet:
// lines in its FIFO, the dynconf socket, the Prometheus listener.
func TestObservabilityThroughTheStandIn(t *testing.T) {
	bin := testutil.StandIn(t)
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	work, err := os.MkdirTemp("", "zpobs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })

	// kuma-dp's side: the FIFO (read end held) and the hijacker socket.
	fifo := kumasock.AccessLog(work, "zp-egress-1", "payments")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	rf, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	rf.SetReadDeadline(time.Now().Add(30 * time.Second))
	hj, err := net.Listen("unix", kumasock.MetricsHijacker(work, "zp-egress-1", "payments"))
	if err != nil {
		t.Fatal(err)
	}
	hijacker := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "scraped %s\n", r.URL.Path)
	})}
	go hijacker.Serve(hj)
	t.Cleanup(func() { hijacker.Close() })

	zonePort, promPort := freeTCPPort(t), freeTCPPort(t)
	if err := s.SetMeshAccessLog("payments", "zp-egress-1", "zp-logs", MeshAccessLog{Backends: []AccessLogBackend{
		{Type: "Tcp", TCP: &TCPAccessLogBackend{Address: "127.0.0.1:5000"}},
	}}); err != nil {
		t.Fatal(err)
	}
	mm := zpMetrics()
	mm.Backends[0].Prometheus.Port = promPort
	mm.Backends = mm.Backends[:1]
	if err := s.SetMeshMetric("payments", "zp-egress-1", "zp-metrics", mm); err != nil {
		t.Fatal(err)
	}

	bootstrap := writeZoneProxyBootstrap(t, s, work, "payments", "zp-egress-1", "zp-egress", listener{Type: "ZoneEgress", Address: "127.0.0.1", Port: int(zonePort), Name: "ze-port"})
	var stderr testutil.SyncBuffer
	cmd := exec.Command(bin, "--config-path", bootstrap, "--drain-time-s", "1", "--file-flush-interval-msec", "50", "--log-level", "info")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("stand-in stderr:\n%s", stderr.String())
		}
	})

	dynconf := testutil.UnixHTTP(kumasock.DynamicConfig(work), 5*time.Second)
	var etag string
	await(t, 20*time.Second, "dynconf answering", func() bool {
		code, e, _, err := httpGet(dynconf, "http://localhost/meshmetric", "")
		etag = e
		return err == nil && code == 200
	})
	if code, _, b, err := httpGet(dynconf, "http://localhost/meshmetric", etag); err != nil || code != 304 || b != "" {
		t.Errorf("with the Etag: %d %q %v", code, b, err)
	}
	if code, _, _, _ := httpGet(dynconf, "http://localhost/otel", ""); code != 404 {
		t.Errorf("/otel: %d, want 404", code)
	}
	code, _, b, err := httpGet(&http.Client{Timeout: 5 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort), "")
	if err != nil || code != 200 || b != "scraped /meshmetric\n" {
		t.Errorf("scrape: %d %q %v", code, b, err)
	}

	// A TLS connection to the egress with the right SNI matches the zone
	// filter chain: one line on connect, one on close.
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", zonePort))
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: "sni.extsvc.payments.default.httpbin.80", InsecureSkipVerify: true})
	go tc.Handshake() // the stand-in proxies nothing and never answers
	lines := bufio.NewReader(rf)
	first, err := lines.ReadString('\n')
	if err != nil {
		t.Fatalf("no line on connect: %v", err)
	}
	conn.Close()
	second, err := lines.ReadString('\n')
	if err != nil {
		t.Fatalf("no line on close: %v", err)
	}
	for _, l := range []string{first, second} {
		var v struct{ Address, Message string }
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Address != "127.0.0.1:5000" ||
			!strings.Contains(v.Message, "] - payments 127.0.0.1(unknown)->-(unknown) took ") {
			t.Errorf("line %q", l)
		}
	}
	// Nothing was read at connect; the ClientHello was by the close.
	if !strings.Contains(first, "received: 0 bytes") || strings.Contains(second, "received: 0 bytes") {
		t.Errorf("byte counts: connect %q, close %q", first, second)
	}

	// Removing the MeshMetric removes the dynconf and Prometheus listeners.
	s.DeleteMeshMetric("payments", "zp-egress-1", "zp-metrics")
	await(t, 10*time.Second, "Prometheus listener gone", func() bool {
		return !testutil.Accepts(fmt.Sprintf("127.0.0.1:%d", promPort))
	})
	await(t, 10*time.Second, "dynconf listener gone", func() bool {
		_, _, _, err := httpGet(dynconf, "http://localhost/meshmetric", "")
		return err != nil
	})
}

// await polls cond until it holds or d passes (the stand-in starts slowly
// on a loaded machine).
var await = testutil.Eventually
