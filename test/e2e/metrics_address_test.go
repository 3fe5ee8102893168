package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// --metrics-address: Prometheus on another host scrapes /metrics there,
// and reaches neither /ready nor /logging; loopback keeps all three.
func TestMetricsAddressServesOnlyMetrics(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	_, p, agent := readyEgress(t, nil, "--metrics-address", metricsAddr)
	loopback := "127.0.0.1:" + strconv.Itoa(p.Readiness)

	cases := []struct {
		method, addr, path string
		code               int
		contains           []string
	}{
		{"GET", metricsAddr, "/metrics", 200, []string{"\nzoneproxy_ready 1\n", "\nprocess_resident_memory_bytes ", "\ngo_goroutines ", "\nenvoy_server_live 1\n"}},
		{"GET", metricsAddr, "/ready", 404, nil},
		{"GET", metricsAddr, "/logging", 404, nil},
		{"POST", metricsAddr, "/logging?level=debug", 404, nil},
		{"GET", metricsAddr, "/", 404, nil},
		{"GET", loopback, "/metrics", 200, []string{"\nzoneproxy_ready 1\n"}},
		{"GET", loopback, "/ready", 200, []string{"READY"}},
		{"GET", loopback, "/logging", 200, nil},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, "http://"+tc.addr+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s%s: %v", tc.method, tc.addr, tc.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s%s: %d, want %d\n%s", tc.method, tc.addr, tc.path, resp.StatusCode, tc.code, string(b))
		}
		for _, want := range tc.contains {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s %s%s lacks %q", tc.method, tc.addr, tc.path, want)
			}
		}
	}

	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if harness.Dial(metricsAddr) {
		t.Errorf("%s still accepts connections after the agent stopped", metricsAddr)
	}
}

// A --metrics-address the agent cannot use stops it before anything is
// sent to the control plane, naming the setting and the fix.
func TestMetricsAddressProblems(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // subtests run after this function returns
	cases := []struct {
		name, addr string
		want       string
		code       int // 1 for a port in use: its holder may free it, and systemd restarts the agent
	}{
		{"in use", busy.Addr().String(), "cannot bind " + busy.Addr().String() + " for --metrics-address (bind: address already in use): free the port or set --metrics-address to another one; it is held by pid " + strconv.Itoa(os.Getpid()), 1},
		{"not host:port", "9903", `--metrics-address: "9903" is not host:port: use an IP of this host and a port`, 78},
		{"a host name", "metrics.internal:9903", `--metrics-address: "metrics.internal:9903": "metrics.internal" is not an IP address`, 78},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZone(t, bins, "payments")
			p := zone.NewProxy("payments", "egress")
			code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p, "--metrics-address", tc.addr)...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, tc.code, tc.want, out)
			}
			if n := len(zone.CP.BootstrapRequests()); n != 0 {
				t.Errorf("the control plane got %d bootstrap requests", n)
			}
		})
	}
}
