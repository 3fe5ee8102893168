package e2e

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// --health-address: a load balancer on another host probes /ready there
// and follows a maintenance drain, and can change nothing.
func TestHealthAddressFollowsReadinessAndChangesNothing(t *testing.T) {
	t.Parallel()
	healthAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	_, p, _ := readyEgress(t, nil, "--health-address", healthAddr, "--drain-time", maintenanceDrainTime.String(), "--drain-min", "1s")
	probe := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+healthAddr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := probe("GET", "/ready"); code != 200 || !strings.HasPrefix(body, "READY") {
		t.Fatalf("GET /ready: %d %q", code, body)
	}
	for _, path := range []string{"/drain", "/undrain", "/logging?level=debug"} {
		if code, _ := probe("POST", path); code != 404 {
			t.Errorf("POST %s on the health address: %d, want 404", path, code)
		}
	}
	for _, path := range []string{"/metrics", "/status", "/logging"} {
		if code, _ := probe("GET", path); code != 404 {
			t.Errorf("GET %s on the health address: %d, want 404", path, code)
		}
	}
	if code, out := maintain(t, p, "drain"); code != 0 {
		t.Fatalf("drain: exit %d\n%s", code, out)
	}
	if code, body := probe("GET", "/ready"); code != 503 || !strings.HasPrefix(body, "DRAINED\n") {
		t.Errorf("GET /ready while drained: %d %q", code, body)
	}
}

// A health address in use is a port another process may free: exit 1,
// naming the flag.
func TestHealthAddressInUse(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil, "--health-address", busy.Addr().String())
	if code := agent.Wait(promptly); code != 1 {
		t.Errorf("exit %d, want 1\n%s", code, agent.Output())
	}
	if want := "cannot bind " + busy.Addr().String() + " for --health-address (bind: address already in use): free the port or set --health-address to another one"; !strings.Contains(agent.Output(), want) {
		t.Errorf("output lacks %q:\n%s", want, agent.Output())
	}
}
