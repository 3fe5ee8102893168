package e2e

import (
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// A web page whose name rebinds to 127.0.0.1 (or to the host) sends its
// own name as Host: the agent refuses it, on the loopback port and on
// --metrics-address, so the page reads neither /ready, /status nor
// /metrics. curl and zoneproxy's commands ask by IP or localhost.
func TestHardeningRebindingHostsAreRefused(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	_, p, _ := readyEgress(t, nil, "--metrics-address", metricsAddr)
	lo := "127.0.0.1:" + strconv.Itoa(p.Readiness)
	cases := []struct {
		name, addr, path, host string
		want                   int
	}{
		{"/ready by 127.0.0.1", lo, "/ready", lo, 200},
		{"/ready by localhost", lo, "/ready", "localhost:" + strconv.Itoa(p.Readiness), 200},
		{"/ready by a rebinding name", lo, "/ready", "attacker.example:" + strconv.Itoa(p.Readiness), 421},
		{"/status by a rebinding name", lo, "/status", "attacker.example", 421},
		{"/metrics by a rebinding name", lo, "/metrics", "attacker.example", 421},
		{"the metrics listener by an IP", metricsAddr, "/metrics", "10.0.0.5:9903", 200},
		{"the metrics listener by a rebinding name", metricsAddr, "/metrics", "attacker.example:9903", 421},
	}
	for _, tc := range cases {
		code, body := testutil.AskWithHost(t, nil, tc.addr, http.MethodGet, tc.path, tc.host)
		if code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.want)
		}
		if code == 421 && !strings.Contains(body, "DNS rebinding") {
			t.Errorf("%s: the refusal does not say why: %q", tc.name, body)
		}
	}
}

// Another local user can read /ready but cannot drain the proxy or change
// its log levels; root (the agent's user here) can.
func TestHardeningOnlyRootOrTheAgentsUserMayDrain(t *testing.T) {
	t.Parallel()
	_, p, agent := readyEgress(t, nil)
	lo := "127.0.0.1:" + strconv.Itoa(p.Readiness)
	const nobody = 65534
	for _, path := range []string{"/drain", "/undrain", "/logging?level=debug"} {
		code, body := testutil.AskWithHost(t, testutil.DialAs(t, nobody, lo), lo, http.MethodPost, path, lo)
		if code != http.StatusForbidden || !strings.Contains(body, "comes from uid 65534") || !strings.Contains(body, "only root") {
			t.Errorf("POST %s from uid %d: %d %q, want 403 naming the user and who may", path, nobody, code, body)
		}
	}
	if code, body := testutil.AskWithHost(t, testutil.DialAs(t, nobody, lo), lo, http.MethodGet, "/ready", lo); code != 200 || body != "READY\n" {
		t.Errorf("GET /ready from uid %d: %d %q, want 200 READY", nobody, code, body)
	}
	if c, _ := harness.Readiness(p.Readiness); c != 200 || agent.Exited() {
		t.Fatalf("the refused requests changed the agent: /ready %d", c)
	}
	if strings.Contains(agent.Output(), "draining for maintenance") || strings.Contains(agent.Output(), "log level changed") {
		t.Fatalf("a refused request was acted on:\n%s", agent.Output())
	}
	// The agent's own user (root here) drains with zoneproxy's command.
	if code, out := maintain(t, p, "drain"); code != 0 {
		t.Fatalf("zoneproxy drain as root: exit %d\n%s", code, out)
	}
}

// A local user who takes the readiness port before the agent starts no
// longer stops it for good (78, not restarted by systemd) and stands in
// for it: the agent exits 1 naming the holder, and once the port is free
// the next start (systemd's restart) serves.
func TestHardeningASquatterOnTheReadinessPortIsOutlasted(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	squatter, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.Readiness))
	if err != nil {
		t.Fatal(err)
	}
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p)...)
	holder := "it is held by pid " + strconv.Itoa(os.Getpid())
	if code != 1 || !strings.Contains(out, "--readiness-port") || !strings.Contains(out, holder) || !strings.Contains(out, "a restart tries again") {
		t.Fatalf("exit %d, want 1 naming %q:\n%s", code, holder, out)
	}
	if n := len(zone.CP.BootstrapRequests()); n != 0 {
		t.Fatalf("%d bootstrap requests sent", n)
	}
	squatter.Close()
	again := zone.Start(p, nil)
	again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
}
