package e2e

import (
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// The main story: started before its mesh exists, the agent waits, then
// bootstraps, runs Envoy, turns ready, and drains and stops on SIGTERM.
func TestWaitForMeshThenServeThenDrain(t *testing.T) {
	cases := []struct {
		role      string
		listeners []string
	}{
		{"egress", []string{"self_zoneegress_dp_ze-port"}},
		{"ingress", []string{"self_zoneingress_dp_zi-port"}},
		{"combined", []string{"self_zoneingress_dp_zi-port", "self_zoneegress_dp_ze-port"}},
	}
	for _, tc := range cases {
		t.Run(tc.role, func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZone(t, bins)
			p := zone.NewProxy("payments", tc.role)
			agent := zone.Start(p, nil)

			agent.AwaitReadiness(p.Readiness, 503, "WAITING_FOR_MESH", promptly)
			agent.AwaitLog(`waiting for mesh`, promptly)
			if body := readyBody(t, p.Readiness); !strings.Contains(body, `waiting for mesh "payments" (attempt `) {
				t.Errorf("503 body does not say why: %q", body)
			}
			if len(harness.Children(agent.PID())) != 0 {
				t.Fatal("Envoy started before the mesh exists")
			}

			zone.CP.CreateMesh("payments")
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			envoyPID := agent.EnvoyPID(promptly)

			nodeID := "payments.zone-proxy-payments-" + tc.role + "-"
			harness.Eventually(t, promptly, "the control plane to see the proxy's listeners", func() bool {
				for _, px := range zone.CP.Proxies() {
					if strings.HasPrefix(px.NodeID, nodeID) && px.Connected {
						return slices.Equal(sorted(px.Listeners), sorted(tc.listeners))
					}
				}
				return false
			})
			if tc.role != "ingress" && !harness.Dial("127.0.0.1:"+strconv.Itoa(p.Egress)) {
				t.Error("Envoy does not accept connections on the egress port")
			}
			if tc.role != "egress" && !harness.Dial("127.0.0.1:"+strconv.Itoa(p.Ingress)) {
				t.Error("Envoy does not accept connections on the ingress port")
			}
			assertPrivate(t, p.WorkDir)

			agent.Signal(syscall.SIGTERM)
			if code := agent.Wait(promptly); code != 0 {
				t.Fatalf("exit code %d, want 0", code)
			}
			if !harness.ProcessGone(envoyPID) {
				t.Fatal("Envoy outlived the agent")
			}
			out := agent.Output()
			for _, want := range []string{"draining Envoy", "Envoy stopped"} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %q", want)
				}
			}
			left, _ := os.ReadDir(p.WorkDir)
			if len(left) != 0 {
				t.Errorf("work dir not cleaned: %v", names(left))
			}
		})
	}
}

func assertPrivate(t *testing.T, wd string) {
	t.Helper()
	fi, err := os.Stat(wd)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("work dir mode %v, want 0700 (%v)", fi.Mode().Perm(), err)
	}
	fi, err = os.Stat(wd + "/bootstrap.yaml")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("bootstrap.yaml mode want 0600: %v %v", fi, err)
	}
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestGarbageConfigListsEveryProblem(t *testing.T) {
	dir := harness.ShortTempDir(t)
	file := dir + "/zp.yaml"
	if err := os.WriteFile(file, []byte("mesh: Payments!\nrole: sideways\ndrain-time: forever\nreadiness-port: 0\nfavourite-colour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := harness.Run(t, bins.Zoneproxy, nil, "run", "--config", file, "--cp-address", "http://localhost:5681",
		"--envoy-binary", bins.Envoy, "--address", "127.0.0.1")
	if code != 78 {
		t.Fatalf("exit %d, want 78\n%s", code, out)
	}
	for _, want := range []string{
		`unknown key "favourite-colour"`, "--role:", "--drain-time:", "--readiness-port:", "--mesh:", "--cp-address:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestMissingEnvoyBinaryIsAConfigError(t *testing.T) {
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p, "--envoy-binary", "/nonexistent/envoy")...)
	if code != 78 || !strings.Contains(out, "--envoy-binary") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if n := len(zone.CP.BootstrapRequests()); n != 0 {
		t.Fatalf("%d bootstrap requests sent before failing", n)
	}
}

func TestWrongCAIsAConfigErrorWithoutRetries(t *testing.T) {
	zone := harness.NewZone(t, bins, "payments")
	other := harness.NewZone(t, bins)
	p := zone.NewProxy("payments", "egress")
	code, out := harness.Run(t, bins.Zoneproxy, nil, zone.Args(p, "--ca-cert-file", other.CP.CACertFile())...)
	if code != 78 || !strings.Contains(out, "--ca-cert-file") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if strings.Contains(out, "retrying") {
		t.Fatalf("retried a TLS verification failure:\n%s", out)
	}
}

func TestTokenNeverAppearsInLogsOrEnvoyCommandLine(t *testing.T) {
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	tok, _ := os.ReadFile(p.TokenFile)
	agent := zone.Start(p, nil, "--log-level", "debug", "--envoy-log-level", "debug")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	envoyPID := agent.EnvoyPID(promptly)
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(envoyPID) + "/cmdline")
	_, metrics := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics")
	environ, _ := os.ReadFile("/proc/" + strconv.Itoa(envoyPID) + "/environ")
	agent.Signal(syscall.SIGTERM)
	agent.Wait(promptly)
	secret := strings.TrimSpace(string(tok))
	for where, text := range map[string]string{"logs": agent.Output(), "Envoy argv": string(cmdline), "Envoy environment": string(environ), "/metrics": metrics} {
		if strings.Contains(text, secret) {
			t.Errorf("token found in %s", where)
		}
	}
}

func TestReadinessIsLoopbackOnly(t *testing.T) {
	_, p, _ := readyEgress(t, nil)
	ips := nonLoopbackIPs()
	for _, ip := range ips {
		if harness.Dial(net.JoinHostPort(ip, strconv.Itoa(p.Readiness))) {
			t.Errorf("readiness reachable on %s", ip)
		}
	}
}

func nonLoopbackIPs() []string {
	addrs, _ := net.InterfaceAddrs()
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}
