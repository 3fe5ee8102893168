package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// namedProxy starts a zone proxy with a fixed Dataplane name, so policies
// can be attached to it on the test control plane.
func namedProxy(t *testing.T, zone *harness.Zone, mesh, role, name string, extra ...string) (harness.Proxy, *harness.Agent) {
	t.Helper()
	p := zone.NewProxy(mesh, role)
	agent := zone.Start(p, nil, append([]string{"--name", name}, extra...)...)
	return p, agent
}

// sink is a TCP access-log backend on loopback that collects lines.
type sink struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	conns []net.Conn
}

func newSink(t *testing.T, addr string) *sink {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					s.mu.Lock()
					s.lines = append(s.lines, sc.Text())
					s.mu.Unlock()
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *sink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func (s *sink) addr() string { return s.ln.Addr().String() }

// kill ends the backend as a crash would: listener and connections.
func (s *sink) kill() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// connect opens one connection through the zone listener and closes it
// once Envoy has counted it, so Envoy writes its access-log lines; it
// returns when Envoy has seen it close.
func connect(t *testing.T, zone *harness.Zone, p harness.Proxy, role string) {
	t.Helper()
	port := p.Egress
	if role == "ingress" {
		port = p.Ingress
	}
	c, err := harness.DialTLSHello(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), controlplane.DestinationSNI(p.Mesh, role))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	count := func() int64 { n, _ := harness.ZoneConnections(p.WorkDir); return n }
	harness.Eventually(t, promptly, "Envoy to count the connection", func() bool { return count() >= 1 })
	c.Close()
	harness.Eventually(t, promptly, "Envoy to see the connection close", func() bool { return count() == 0 })
}

func TestMeshAccessLogReachesATCPBackend(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	const name = "zp-al"
	snk := newSink(t, "127.0.0.1:0")
	if err := zone.CP.SetMeshAccessLog("payments", name, "zp-logs", controlplane.MeshAccessLog{Backends: []controlplane.AccessLogBackend{
		{Type: "Tcp", TCP: &controlplane.TCPAccessLogBackend{Address: snk.addr()}},
	}}); err != nil {
		t.Fatal(err)
	}
	p, agent := namedProxy(t, zone, "payments", "egress", name)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	fifo := kumasock.AccessLog(p.WorkDir, name, "payments")
	if fi, err := os.Stat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("access-log FIFO %s: %v %v", fifo, fi, err)
	}

	connect(t, zone, p, "egress")
	harness.Eventually(t, promptly, "a line at the TCP backend", func() bool { return len(snk.got()) >= 1 })
	if line := snk.got()[0]; !strings.Contains(line, "payments") {
		t.Errorf("line %q does not look like the policy's default format", line)
	}

	// The backend goes away and comes back on the same address: later
	// lines arrive, and the FIFO never blocks Envoy meanwhile.
	addr := snk.addr()
	snk.kill()
	for range 3 {
		connect(t, zone, p, "egress")
	}
	again := newSink(t, addr)
	connect(t, zone, p, "egress")
	harness.Eventually(t, promptly, "lines at the restarted backend", func() bool { return len(again.got()) >= 1 })
	if code, word := harness.Readiness(p.Readiness); code != 200 {
		t.Fatalf("readiness %d %s while the backend was down", code, word)
	}
	_, scrape := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics")
	if !strings.Contains(scrape, "zoneproxy_accesslog_lines_forwarded_total") {
		t.Errorf("/metrics lacks the access-log counters:\n%s", scrape)
	}

	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Lstat(fifo); !os.IsNotExist(err) {
		t.Fatalf("the FIFO is still there after stop: %v", err)
	}
}

func TestMeshMetricPrometheusScrapeIsFilteredAndLabelled(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	const name = "zp-mm"
	port := harness.FreePort(t)
	basic := []controlplane.MetricsProfile{{Name: "Basic"}}
	exclude := []controlplane.MetricsSelector{{Type: "Regex", Match: "^envoy_server_.*"}}
	include := []controlplane.MetricsSelector{{Type: "Exact", Match: "envoy_server_live"}}
	if err := zone.CP.SetMeshMetric("payments", name, "zp-metrics", controlplane.MeshMetric{
		Sidecar:  &controlplane.MetricsSidecar{Profiles: &controlplane.MetricsProfiles{AppendProfiles: &basic, Exclude: &exclude, Include: &include}},
		Backends: []controlplane.MetricsBackend{{Type: "Prometheus", Prometheus: &controlplane.PrometheusBackend{Port: uint32(port)}}},
	}); err != nil {
		t.Fatal(err)
	}
	p, agent := namedProxy(t, zone, "payments", "egress", name)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)

	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	var body string
	harness.Eventually(t, promptly, "a filtered scrape through Envoy's MeshMetric listener", func() bool {
		code, b := tryGet(url)
		body = b
		// The extra labels are only on a filtered scrape (zoneproxy_info
		// names the mesh on every one).
		return code == 200 && strings.Contains(b, `kuma_proxy_role="zone-egress"`)
	})
	for _, want := range []string{`envoy_server_live{`, `kuma_proxy_role="zone-egress"`, `zoneproxy_build_info`} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "envoy_server_") && !strings.HasPrefix(line, "envoy_server_live") {
			t.Fatalf("the profile's exclude did not apply: %q", line)
		}
	}

	// Policy removed: the agent reverts to unfiltered scrapes on its socket.
	zone.CP.DeleteMeshMetric("payments", name, "zp-metrics")
	hijacker := kumasock.MetricsHijacker(p.WorkDir, name, "payments")
	harness.Eventually(t, promptly, "unfiltered scrapes once the policy is gone", func() bool {
		b, err := unixGet(hijacker, "/meshmetric")
		return err == nil && strings.Contains(b, "envoy_server_uptime") && !strings.Contains(b, `kuma_proxy_role=`)
	})
	agent.AwaitLog("MeshMetric policy removed", promptly)

	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Lstat(hijacker); !os.IsNotExist(err) {
		t.Fatalf("the MeshMetric socket is still there after stop: %v", err)
	}
}

func TestWithheldZoneListenerIsNotReady(t *testing.T) {
	harness.SkipOnKuma214(t, "3.0 sends an LDS without the zone listener (NO_ZONE_LISTENER); 2.14 sends no LDS at all (TestKuma214IngressWithoutMeshServiceSaysSo)")
	t.Parallel()
	for _, role := range []string{"ingress", "egress"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZone(t, bins, "payments")
			name := "zp-nzl-" + role
			if err := zone.CP.WithholdZoneListeners("payments", name, true); err != nil {
				t.Fatal(err)
			}
			p, agent := namedProxy(t, zone, "payments", role, name)
			agent.AwaitReadiness(p.Readiness, 503, "NO_ZONE_LISTENER", promptly)
			_, body := rawReadiness(t, p.Readiness)
			want := map[string]string{"ingress": "MeshService", "egress": "MeshExternalService"}[role]
			if !strings.Contains(body, want) {
				t.Errorf("the reason does not name the fix (%s):\n%s", want, body)
			}
			present := func(v string) *regexp.Regexp {
				return regexp.MustCompile(`(?m)^zoneproxy_zone_listener_present\{listener="self_zone` + role + `_dp_[^"]*"\} ` + v + `$`)
			}
			if _, m := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics"); !present("0").MatchString(m) {
				t.Errorf("/metrics does not say the zone listener is absent (zoneproxy_zone_listener_present 0):\n%s", m)
			}
			if err := zone.CP.WithholdZoneListeners("payments", name, false); err != nil {
				t.Fatal(err)
			}
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			if _, m := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics"); !present("1").MatchString(m) {
				t.Errorf("/metrics does not say the zone listener is back (zoneproxy_zone_listener_present 1):\n%s", m)
			}
		})
	}
}

// Two zone proxies of two meshes on one host: each one's access log goes to
// its own backend through its own FIFO.
func TestTwoZoneProxiesKeepTheirSocketsApart(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments", "billing")
	type run struct {
		mesh  string
		sink  *sink
		proxy harness.Proxy
	}
	runs := []*run{{mesh: "payments"}, {mesh: "billing"}}
	for _, r := range runs {
		r.sink = newSink(t, "127.0.0.1:0")
		if err := zone.CP.SetMeshAccessLog(r.mesh, "zp-"+r.mesh, "logs", controlplane.MeshAccessLog{Backends: []controlplane.AccessLogBackend{
			{Type: "Tcp", TCP: &controlplane.TCPAccessLogBackend{Address: r.sink.addr()}},
		}}); err != nil {
			t.Fatal(err)
		}
		p, agent := namedProxy(t, zone, r.mesh, "egress", "zp-"+r.mesh, "--admin-port", strconv.Itoa(harness.FreePort(t)))
		agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
		r.proxy = p
	}
	connect(t, zone, runs[0].proxy, "egress")
	harness.Eventually(t, promptly, "the payments line", func() bool { return len(runs[0].sink.got()) >= 1 })
	if n := len(runs[1].sink.got()); n != 0 {
		t.Fatalf("billing's backend got %d lines of payments' traffic", n)
	}
	if filepath.Dir(kumasock.AccessLog(runs[0].proxy.WorkDir, "zp-payments", "payments")) == filepath.Dir(kumasock.AccessLog(runs[1].proxy.WorkDir, "zp-billing", "billing")) {
		t.Fatal("both FIFOs in one directory")
	}
}

func tryGet(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func unixGet(socket, path string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	resp, err := c.Get("http://localhost" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func rawReadiness(t *testing.T, port int) (int, string) {
	t.Helper()
	return tryGet("http://127.0.0.1:" + strconv.Itoa(port) + "/ready")
}
