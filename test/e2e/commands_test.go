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
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

func TestCheckPassesAndFails(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins)
	p := zone.NewProxy("payments", "egress")
	args := zone.Args(p)
	args[0] = "check"

	code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
	if code == 0 || !strings.Contains(out, `[FAIL] mesh "payments" exists`) || !strings.Contains(out, "[ ok ] control plane") {
		t.Fatalf("missing mesh: exit %d\n%s", code, out)
	}

	zone.CP.CreateMesh("payments")
	code, out = harness.Run(t, bins.Zoneproxy, nil, args...)
	if code != 0 || !strings.Contains(out, "all checks passed") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"Envoy binary", "version 1.39.0", "ports are free", "NO_ZONE_LISTENER until the control plane sends self_zoneegress_dp_ze-port", `dataplane token is a JWT for mesh "payments"`, "TLS verified with " + zone.CP.CACertFile()} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if len(zone.CP.Proxies()) != 0 {
		t.Error("check registered a proxy")
	}
	if _, err := os.Stat(p.WorkDir); err == nil {
		t.Error("check created the work dir")
	}

	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.Egress))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, out = harness.Run(t, bins.Zoneproxy, nil, append(args, "--envoy-binary", "/nonexistent/envoy")...)
	if code == 0 || !strings.Contains(out, "[FAIL] Envoy binary") || !strings.Contains(out, "[FAIL] ports are free") || !strings.Contains(out, "--egress-port") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestRenderDataplane(t *testing.T) {
	code, out := harness.Run(t, bins.Zoneproxy, nil, "render", "dataplane", "--mesh", "payments", "--role", "combined",
		"--address", "10.0.0.5", "--name", "zp-1", "--label", "team=net")
	want := `type: Dataplane
mesh: payments
name: zp-1
labels:
  kuma.io/workload: zone-proxy-payments-combined
  team: net
networking:
  address: 10.0.0.5
  admin:
    port: 9901
  listeners:
    - type: ZoneIngress
      address: 10.0.0.5
      port: 10001
      name: zi-port
    - type: ZoneEgress
      address: 10.0.0.5
      port: 10002
      name: ze-port
`
	if code != 0 || !strings.HasSuffix(out, want) {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestRenderNeedsNoTokenOrCAFile(t *testing.T) {
	// Set as for every command of an instance: render reads them, unused.
	env := []string{"ZONEPROXY_DATAPLANE_TOKEN_FILE=/nonexistent/token", "ZONEPROXY_CA_CERT_FILE=/nonexistent/ca.pem"}
	code, out := harness.Run(t, bins.Zoneproxy, env, "render", "dataplane", "--mesh", "payments", "--role", "egress",
		"--address", "10.0.0.5")
	if code != 0 || !strings.Contains(out, "type: ZoneEgress") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func readyBody(t *testing.T, port int) string {
	t.Helper()
	_, body := get(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/ready")
	return body
}

func TestRenderMeshZoneAddressNeedsIngress(t *testing.T) {
	code, out := harness.Run(t, bins.Zoneproxy, nil, "render", "meshzoneaddress", "--mesh", "payments", "--role", "egress",
		"--address", "10.0.0.5", "--zone", "zone-1")
	if code != 78 || !strings.Contains(out, "--role") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestBootstrapCommandRedactsTheToken(t *testing.T) {
	harness.SkipOnKuma214(t, "looks for DELTA_GRPC in the bootstrap; 2.14 renders GRPC (SotW)")
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	tok, _ := os.ReadFile(p.TokenFile)
	args := []string{"bootstrap"}
	run := zone.Args(p)
	for i := 1; i+1 < len(run); i += 2 {
		switch run[i] {
		case "--retry-initial", "--retry-max", "--drain-time", "--state-dir": // run's alone
		default:
			args = append(args, run[i], run[i+1])
		}
	}
	code, out := harness.Run(t, bins.Zoneproxy, nil, args...)
	if code != 0 || !strings.Contains(out, "DELTA_GRPC") || !strings.Contains(out, "REDACTED") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if strings.Contains(out, strings.TrimSpace(string(tok))) {
		t.Fatal("token printed")
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsAndLogging(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins)
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	base := "http://127.0.0.1:" + strconv.Itoa(p.Readiness)
	agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", 10*time.Second)
	harness.Eventually(t, 10*time.Second, "a mesh_not_found attempt in /metrics", func() bool {
		_, body := get(t, base+"/metrics")
		return strings.Contains(body, `zoneproxy_bootstrap_attempts_total{outcome="mesh_not_found"} `) &&
			!strings.Contains(body, `zoneproxy_bootstrap_attempts_total{outcome="mesh_not_found"} 0`)
	})
	zone.CP.CreateMesh("payments")
	agent.AwaitReadiness(p.Readiness, 200, "READY", 20*time.Second)

	code, body := get(t, base+"/metrics")
	for _, want := range []string{
		`zoneproxy_build_info{`, `zoneproxy_bootstrap_attempts_total{outcome="success"} 1`, "zoneproxy_envoy_up 1",
		"zoneproxy_ready 1", `zoneproxy_phase{phase="READY"} 1`, "zoneproxy_mesh_wait_seconds_total", "envoy_",
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	resp, err := http.Post(base+"/logging?level=debug&envoy=debug", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "zoneproxy: debug") {
		t.Fatalf("POST /logging: %d %s", resp.StatusCode, b)
	}
	if code, body := get(t, base+"/logging"); code != 200 || !strings.Contains(body, "debug") {
		t.Fatalf("GET /logging: %d %s", code, body)
	}
	resp, _ = http.Post(base+"/logging?level=loud", "", nil)
	if resp.StatusCode != 400 {
		t.Fatalf("bad level accepted: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

// drainArgs drain for up to a minute, with no minimum so a drain can end as
// soon as the listeners are quiet; debug logs show the connection count.
var drainArgs = []string{"--drain-time", "60s", "--drain-min", "0s", "--log-level", "debug"}

// sawOneConnection is the agent's drain reading of the one held connection
// (neither missed nor counted once per Envoy worker).
const sawOneConnection = `"connections": 1}`

func TestDrainWaitsForConnectionsAndSecondSignalSkipsIt(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil, drainArgs...)
	zone.HoldConnection(p, "egress")
	agent.Signal(syscall.SIGTERM)
	agent.AwaitReadiness(p.Readiness, 503, "TERMINATING", promptly)
	agent.AwaitLog(sawOneConnection, promptly)
	if agent.Exited() {
		t.Fatal("did not wait for the open connection")
	}
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(agent.Output(), "skipping the rest of the drain") {
		t.Error("second signal not logged")
	}
}

func TestDrainEndsWhenTheLastConnectionCloses(t *testing.T) {
	t.Parallel()
	zone, p, agent := readyEgress(t, nil, drainArgs...)
	conn := zone.HoldConnection(p, "egress")
	agent.Signal(syscall.SIGTERM)
	agent.AwaitReadiness(p.Readiness, 503, "TERMINATING", promptly)
	agent.AwaitLog(sawOneConnection, promptly)
	conn.Close()
	// Well inside the 60 s drain time: the drain ended on zero connections.
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(agent.Output(), "no downstream connections left") {
		t.Error("drain did not end on zero connections")
	}
}

func TestVersionAndCompletion(t *testing.T) {
	code, out := harness.Run(t, bins.Zoneproxy, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "zoneproxy ") || !strings.Contains(out, "commit") {
		t.Fatalf("version: %d %s", code, out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out := harness.Run(t, bins.Zoneproxy, nil, "completion", shell)
		if code != 0 || !strings.Contains(out, "zoneproxy") {
			t.Errorf("completion %s: exit %d", shell, code)
		}
	}
}
