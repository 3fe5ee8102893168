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
	failed []loadFailure
}

type loadFailure struct {
	at   time.Time
	addr string
	err  error
}

func (f loadFailure) String() string {
	return f.at.Format("15:04:05.000") + " " + f.addr + ": " + f.err.Error()
}

// loadAnswerWindow is how long each connection waits for a reset after its
// ClientHello: Envoy holds a zone connection open, so a read that times
// out is a connection served.
const loadAnswerWindow = 30 * time.Millisecond

func startLoad(p harness.Proxy, perSecond int) *loadClient {
	return startLoadOn(perSecond, zoneTarget(p, "egress"), zoneTarget(p, "ingress"))
}

// loadTarget is a zone listener and the SNI a sidecar sends it.
type loadTarget struct{ addr, sni string }

// zoneTarget is p's zone listener of role ("egress" or "ingress").
func zoneTarget(p harness.Proxy, role string) loadTarget {
	port := p.Egress
	if role == "ingress" {
		port = p.Ingress
	}
	return loadTarget{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), controlplane.DestinationSNI(p.Mesh, role)}
}

// startLoadOn opens perSecond connections a second to targets in turn.
func startLoadOn(perSecond int, targets ...loadTarget) *loadClient {
	l := &loadClient{stop: make(chan struct{})}
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
					l.failed = append(l.failed, loadFailure{at: time.Now(), addr: target.addr, err: err})
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

func (l *loadClient) finish() (int, []loadFailure) {
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
	agentBuilds, agentVersions := []string{bins.Zoneproxy, filepath.Join(t.TempDir(), "zoneproxy-next")}, []string{"dev", "9.9.9-next"}
	if err := harness.BuildZoneproxy(agentBuilds[1], agentVersions[1]); err != nil {
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
		// kuma-cp shows the agent that runs now, not the one that started Envoy.
		if got, want := agentSeenBy(zone, node), "zoneproxy-"+agentVersions[(round+1)%2]; got != want {
			t.Errorf("agent upgrade %d: kuma-cp's stream names the agent %q, want %q", round+1, got, want)
		}
		build = 1 - build
		useBuild(build)
		reload(fmt.Sprintf("Envoy upgrade %d", round+1), true)
		if round%(reloads/bootstrapChanges) == 0 {
			runtime++
			zone.CP.SetBootstrapRuntime("re2.max_program_size.warn_level", runtime)
			reload(fmt.Sprintf("bootstrap change %d", int(runtime)-1000), true)
		}
	}
	tries, probes := checkLoad(t, agent, load, ready)
	t.Logf("%d connections and %d /ready probes through %d reloads, %d Envoy upgrades, %d bootstrap changes in %s",
		tries, probes, reloads, upgrades, bootstrapChanges, time.Since(from).Round(time.Second))
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

// migratesQueuedConnections says whether this network namespace moves the
// connections queued on a closing listener to another of its SO_REUSEPORT
// group (net.ipv4.tcp_migrate_req, Linux 5.14+) instead of resetting them.
func migratesQueuedConnections() bool {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// listenerCloses are when an old Envoy was told to close its listeners
// (the agent's "Envoy handover done" lines).
func listenerCloses(t *testing.T, output string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, line := range strings.Split(output, "\n") {
		if !strings.Contains(line, "Envoy handover done") {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", strings.Fields(line)[0])
		if err != nil {
			t.Fatalf("the time of %q: %v", line, err)
		}
		out = append(out, at)
	}
	return out
}

// kernelResetWindow is how soon after an old Envoy's listeners were told
// to close a connection reset before Envoy accepted it counts as the
// kernel's.
const kernelResetWindow = 250 * time.Millisecond

// kernelReset says whether a try that failed at with msg was reset as an
// old Envoy closed its listeners (closes), while it waited in the closing
// listener's queue: at connect, or at its first write (the ClientHello),
// when the handshake was done in the kernel but Envoy never accepted it.
func kernelReset(at time.Time, msg string, closes []time.Time) bool {
	queued := strings.Contains(msg, "connect: connection reset by peer") ||
		strings.Contains(msg, "sending a ClientHello") && strings.Contains(msg, "write: connection reset by peer")
	if !queued {
		return false
	}
	for _, c := range closes {
		if d := at.Sub(c); d >= 0 && d < kernelResetWindow {
			return true
		}
	}
	return false
}

// splitKernelResets takes out the kernel's resets (kernelReset).
func splitKernelResets(failures []loadFailure, closes []time.Time) (rest, kernel []loadFailure) {
	for _, f := range failures {
		if kernelReset(f.at, f.err.Error(), closes) {
			kernel = append(kernel, f)
		} else {
			rest = append(rest, f)
		}
	}
	return rest, kernel
}

// withoutKernelResets drops from a watcher's failed tries ("15:04:05.000
// …", local time of day) the kernel's resets, where this network
// namespace does not migrate queued connections.
func withoutKernelResets(t *testing.T, failed []string, output string) []string {
	t.Helper()
	if migratesQueuedConnections() {
		return failed
	}
	closes := listenerCloses(t, output)
	var rest []string
	for _, f := range failed {
		clock, err := time.ParseInLocation("15:04:05.000", strings.Fields(f)[0], time.Local)
		if err == nil && len(closes) > 0 {
			c := closes[0].Local()
			at := time.Date(c.Year(), c.Month(), c.Day(), clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), time.Local)
			if kernelReset(at, f, closes) {
				t.Logf("reset by the kernel as the old Envoy closed its listener (net.ipv4.tcp_migrate_req is not 1 here): %s", f)
				continue
			}
		}
		rest = append(rest, f)
	}
	return rest
}

func joinFailures(fs []loadFailure) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return strings.Join(out, "\n")
}

// agentSeenBy is the agent build the node's current stream named to the
// control plane.
func agentSeenBy(zone *harness.Zone, node string) string {
	for _, p := range zone.CP.Proxies() {
		if p.NodeID == node {
			return p.Version
		}
	}
	return ""
}

// checkLoad stops the load and the /ready watch and fails on any
// connection refused or reset (but the kernel's, where it resets what
// waits in a closing listener's queue: the agent warns of it, and the
// package's sysctl.d sets it) and any /ready that was not 200.
func checkLoad(t *testing.T, agent *harness.Agent, load *loadClient, ready *watcher) (tries, probes int) {
	t.Helper()
	tries, failures := load.finish()
	probes, notReady := ready.finish()
	if !migratesQueuedConnections() {
		var kernel []loadFailure
		failures, kernel = splitKernelResets(failures, listenerCloses(t, agent.Output()))
		for _, f := range kernel {
			t.Logf("reset by the kernel as the old Envoy closed its listener (net.ipv4.tcp_migrate_req is not 1 here): %s", f)
		}
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d connections were refused or reset:\n%s", len(failures), tries, joinFailures(failures))
	}
	if len(notReady) > 0 {
		t.Errorf("/ready was not 200 %d times of %d:\n%s", len(notReady), probes, strings.Join(notReady, "\n"))
	}
	return tries, probes
}
