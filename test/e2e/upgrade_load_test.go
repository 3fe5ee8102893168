package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// loadClient opens connections through a combined proxy's zone listeners
// at a steady rate, egress and ingress in turn, each with a real TLS
// ClientHello, and keeps every one that is refused or reset (or closed at
// once): the steady load of an upgrade.
type loadClient struct {
	stop   chan struct{}
	done   sync.WaitGroup
	mu     sync.Mutex
	tries  int
	failed []string
}

// loadAnswerWindow is how long each connection waits for a reset after its
// ClientHello: Envoy holds a zone connection open, so a read that times
// out is a connection served.
const loadAnswerWindow = 30 * time.Millisecond

func startLoad(p harness.Proxy, perSecond int) *loadClient {
	l := &loadClient{stop: make(chan struct{})}
	targets := []struct{ addr, sni string }{
		{net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Egress)), controlplane.DestinationSNI(p.Mesh, "egress")},
		{net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Ingress)), controlplane.DestinationSNI(p.Mesh, "ingress")},
	}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			target := targets[i%len(targets)]
			l.done.Add(1)
			go func() {
				defer l.done.Done()
				err := connectOnce(target.addr, target.sni)
				l.mu.Lock()
				defer l.mu.Unlock()
				l.tries++
				if err != nil {
					l.failed = append(l.failed, time.Now().Format("15:04:05.000")+" "+target.addr+": "+err.Error())
				}
			}()
		}
	}()
	return l
}

// connectOnce sends a ClientHello and waits loadAnswerWindow for a reset.
func connectOnce(addr, sni string) error {
	c, err := harness.DialTLSHello(addr, sni)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(loadAnswerWindow))
	_, err = c.Read(make([]byte, 1))
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return fmt.Errorf("after the ClientHello: %v", err)
}

func (l *loadClient) finish() (int, []string) {
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tries, l.failed
}

// Steady load through 20 agent reloads (each to another agent version,
// as an upgrade of the agent alone), 20 Envoy upgrades (another stand-in
// build, brought by a reload as a package brings it) and 5 kuma-cp
// bootstrap changes (each applied by a reload): no connection is
// refused or reset, /ready stays 200, an agent-only reload keeps Envoy's
// PID, kuma-cp accepts one stream per reload and none per handover, and
// its Dataplane is never gone for more than a second.
func TestSteadyLoadThroughReloadsAndEnvoyHandovers(t *testing.T) {
	t.Parallel()
	const reloads, upgrades, bootstrapChanges = 20, 20, 5
	zone := reloadable(t)
	agentBuilds := []string{bins.Zoneproxy, filepath.Join(t.TempDir(), "zoneproxy-next")}
	if err := harness.BuildZoneproxy(agentBuilds[1], "9.9.9-next"); err != nil {
		t.Fatal(err)
	}
	wrapper, write := replaceableEnvoy(t)
	builds := []string{
		"", // the stand-in's own
		"0123456789abcdef0123456789abcdef01234567/1.39.1/Clean/RELEASE/BoringSSL",
	}
	useBuild := func(i int) {
		if builds[i] == "" {
			write("exec " + bins.Envoy + " \"$@\"\n")
			return
		}
		write("ENVOY_STANDIN_VERSION_OUTPUT='envoy  version: " + builds[i] + "\n' exec " + bins.Envoy + " \"$@\"\n")
	}
	p := zone.NewProxy("payments", "combined")
	agent := zone.Start(p, nil, "--envoy-binary", wrapper, "--drain-time", "1s", "--drain-min", "300ms")
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	awaitCached(t, p)
	dp := onlyDataplane(t, zone)
	node := dp.Mesh + "." + dp.Name
	before := zone.CP.NodeStream(node)
	from := time.Now()

	load := startLoad(p, 100)
	ready := watch(20*time.Millisecond, readyProbe(p))
	// count is how many lines of the agent's output say what.
	count := func(what string) int { return strings.Count(agent.Output(), what) }
	const tookOver, keptEnvoy = "after the reload, a new Envoy took over", "after the reload, the running Envoy is as this program would start it"
	reload := func(what string, wantHandover bool) {
		t.Helper()
		pid, _ := envoyOf(t, p)
		handovers, kept := count(tookOver), count(keptEnvoy)
		if code, out := reloadCommand(t, zone, p); code != 0 {
			t.Fatalf("%s: zoneproxy reload: exit %d\n%s", what, code, out)
		}
		if !wantHandover {
			harness.Eventually(t, 30*time.Second, what+": the new program's check of Envoy", func() bool { return count(keptEnvoy) > kept })
			if now, _ := envoyOf(t, p); now != pid || harness.ProcessGone(pid) {
				t.Fatalf("%s: an agent-only reload replaced Envoy %d by %d", what, pid, now)
			}
			return
		}
		harness.Eventually(t, 30*time.Second, what+": a new Envoy to take over", func() bool { return count(tookOver) > handovers })
		harness.Eventually(t, promptly, what+": the old Envoy to exit after its drain", func() bool { return harness.ProcessGone(pid) })
	}
	build, runtime := 0, 1000.0
	for round := 0; round < reloads; round++ {
		copyBinary(t, agentBuilds[(round+1)%2], zone.Bins.Zoneproxy)
		reload(fmt.Sprintf("agent upgrade %d", round+1), false)
		build = 1 - build
		useBuild(build)
		reload(fmt.Sprintf("Envoy upgrade %d", round+1), true)
		if round%(reloads/bootstrapChanges) == 0 {
			runtime++
			zone.CP.SetBootstrapRuntime("re2.max_program_size.warn_level", runtime)
			reload(fmt.Sprintf("bootstrap change %d", int(runtime)-1000), true)
		}
	}
	tries, failures := load.finish()
	probes, notReady := ready.finish()
	t.Logf("%d connections and %d /ready probes through %d reloads, %d Envoy upgrades, %d bootstrap changes in %s",
		tries, probes, reloads, upgrades, bootstrapChanges, time.Since(from).Round(time.Second))
	if len(failures) > 0 {
		t.Errorf("%d of %d connections were refused or reset:\n%s", len(failures), tries, strings.Join(failures, "\n"))
	}
	if len(notReady) > 0 {
		t.Errorf("/ready was not 200 %d times of %d:\n%s", len(notReady), probes, strings.Join(notReady, "\n"))
	}
	if m := agentMetrics(t, p.Readiness); !strings.Contains(m, fmt.Sprintf(`zoneproxy_envoy_handovers_total{result="success"} %d`, upgrades+bootstrapChanges)) ||
		!strings.Contains(m, fmt.Sprintf(`zoneproxy_reloads_total{result="ok"} %d`, reloads+upgrades+bootstrapChanges)) {
		t.Errorf("metrics do not count %d reloads and %d handovers:\n%s", reloads+upgrades+bootstrapChanges, upgrades+bootstrapChanges, m)
	}
	if got := zone.CP.NodeStream(node).Accepted - before.Accepted; got != reloads+upgrades+bootstrapChanges {
		t.Errorf("kuma-cp accepted %d streams of the proxy, want one per reload (%d) and none per handover", got, reloads+upgrades+bootstrapChanges)
	}
	for _, g := range controlplane.DataplaneGaps(zone.CP.DataplaneTimeline(dp.Mesh, dp.Name), from, time.Now()) {
		if g.Duration() > time.Second {
			t.Errorf("kuma-cp had no Dataplane for %s (from %s)", g.Duration(), g.From.Format(time.RFC3339Nano))
		}
	}
	pid, _ := envoyOf(t, p)
	agent.Signal(syscall.SIGTERM)
	if code := agent.Wait(promptly); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	assertNothingLeft(t, agent, pid, p.WorkDir)
	_ = os.Remove(wrapper)
}
