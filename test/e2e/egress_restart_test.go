package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// restartLog and stopLog are the journal lines that tell a restart of an
// egress from a stop.
const (
	restartLog = "restart: the egress stays in kuma-cp's egress set"
	stopLog    = "stop: withdrawing the zone egress from kuma-cp's egress set first"
)

// A lone zone egress restarted (SIGUSR1 outside systemd; systemd's restart
// job under it) stays in kuma-cp's egress set: its sidecars lose it only
// while no Envoy listens (the restart itself) and for the moment between
// kuma-cp's delete of the old Dataplane and the new stream's upsert. A
// stop would withdraw it, leaving them without an egress for the
// withdrawal and the next start's refused stream (about 25 s with
// kuma-cp's defaults).
func TestALoneEgressRestartKeepsItsSidecarsServed(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	args := []string{"--drain-time", "3s", "--drain-min", "3s"}
	agent := zone.Start(p, nil, args...)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	awaitCached(t, p)
	harness.Eventually(t, promptly, "the egress handed out", func() bool { return len(zone.CP.ZoneEgresses("payments")) == 1 })
	dp := onlyDataplane(t, zone)
	node := dp.Mesh + "." + dp.Name
	before := zone.CP.NodeStream(node)

	probe := startEgressProbe(zone)
	t.Cleanup(func() { probe.finish() })
	probe.awaitWorking(t, 20)
	// A connection in flight keeps the drain going for --drain-time.
	held := zone.HoldConnection(p, "egress")
	defer held.Close()

	agent.Signal(syscall.SIGUSR1)
	harness.Eventually(t, promptly, "/status to say a restart is under way", func() bool {
		st, ok := tryStatus(p)
		return ok && st.Phase == "TERMINATING" && st.Stop == "restart"
	})
	if code := agent.Wait(promptly); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, agent.Output())
	}
	if out := agent.Output(); !strings.Contains(out, restartLog) || strings.Contains(out, "withdrawing the zone egress") {
		t.Fatalf("the restart did not keep the egress in the egress set:\n%s", out)
	}
	again := zone.Start(p, nil, args...)
	again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	harness.Eventually(t, promptly, "kuma-cp to take the new stream", func() bool {
		now := zone.CP.NodeStream(node)
		return now.Connected && now.Accepted > before.Accepted
	})
	awaitEgressSetSettled(t, zone, 1)
	probe.awaitWorking(t, 20)
	outages := probe.finish()
	down := totalOutage(outages)
	t.Logf("the sidecar had no working egress for %s in all through the restart: %v", down.Round(time.Millisecond), outages)
	if got := zone.CP.NodeStream(node).Accepted - before.Accepted; got != 1 {
		t.Errorf("kuma-cp accepted %d streams of this node since the restart, want 1: no withdrawal", got)
	}
	// A stop costs the sidecars the withdrawal (the deregistration delay
	// and the propagation) and the next start's refusal: 5 s and more
	// with FastLifecycle. A restart costs them the restart itself.
	if limit := 3 * time.Second; down > limit {
		t.Errorf("the sidecar had no working egress for %s, want at most %s", down.Round(time.Millisecond), limit)
	}
	again.Signal(syscall.SIGKILL)
	again.Wait(promptly)
}

// stopStatus is what GET /status says of a stop under way.
type stopStatus struct{ Phase, Stop string }

// tryStatus is GET /status, or false while the agent does not answer.
func tryStatus(p harness.Proxy) (stopStatus, bool) {
	var st stopStatus
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(p.Readiness) + "/status")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&st) == nil
}

// awaitEgressSetSettled waits until the sidecars see n egresses and no
// change of the set is still on its way to them.
func awaitEgressSetSettled(t *testing.T, zone *harness.Zone, n int) {
	t.Helper()
	harness.Eventually(t, promptly, fmt.Sprintf("the sidecars to see %d egresses, settled", n), func() bool {
		tl := zone.CP.ZoneEgressTimeline("payments")
		return len(tl) > 0 && len(tl[len(tl)-1].Egresses) == n && time.Now().After(tl[len(tl)-1].EffectiveAt)
	})
}

// outage is a time the sidecar had no working egress, and why it began.
type outage struct {
	From, To time.Time
	Why      string
}

func (o outage) String() string {
	return fmt.Sprintf("%s from %s (%s)", o.To.Sub(o.From).Round(time.Millisecond), o.From.Format("15:04:05.000"), o.Why)
}

func totalOutage(os []outage) time.Duration {
	var d time.Duration
	for _, o := range os {
		d += o.To.Sub(o.From)
	}
	return d
}

// egressProbe is a sidecar that connects every 20 ms to an egress kuma-cp
// lists for it right now, and records when it had none that worked: none
// listed, or the one it tried refused.
type egressProbe struct {
	stop, done chan struct{}
	once       sync.Once
	mu         sync.Mutex
	downSince  time.Time
	why        string
	outages    []outage
	working    int
}

func startEgressProbe(zone *harness.Zone) *egressProbe {
	p := &egressProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			p.record(tryEgress(zone, i))
		}
	}()
	return p
}

// tryEgress connects to the i-th egress listed (round robin); "" is a
// connection that worked, anything else why there was none.
func tryEgress(zone *harness.Zone, i int) string {
	set := zone.CP.ZoneEgresses("payments")
	if len(set) == 0 {
		return "none listed"
	}
	e := set[i%len(set)]
	c, err := harness.DialTLSHello(net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port))), controlplane.DestinationSNI("payments", "egress"))
	if err != nil {
		return err.Error()
	}
	c.Close()
	return ""
}

func (p *egressProbe) record(failure string) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case failure == "":
		p.working++
		if !p.downSince.IsZero() {
			p.outages = append(p.outages, outage{From: p.downSince, To: now, Why: p.why})
			p.downSince = time.Time{}
		}
	case p.downSince.IsZero():
		p.downSince, p.why = now, failure
	}
}

// awaitWorking waits for n more connections that worked.
func (p *egressProbe) awaitWorking(t *testing.T, n int) {
	t.Helper()
	awaitMore(t, "sidecar connections through an egress", func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.working
	}, n)
}

// awaitMore waits until count has grown by n.
func awaitMore(t *testing.T, what string, count func() int, n int) {
	t.Helper()
	from := count()
	harness.Eventually(t, promptly, what, func() bool { return count() >= from+n })
}

// finish stops the probe and returns its outages, one still running
// counted until now.
func (p *egressProbe) finish() []outage {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]outage(nil), p.outages...)
	if !p.downSince.IsZero() {
		out = append(out, outage{From: p.downSince, To: time.Now(), Why: p.why + " (still)"})
	}
	return out
}
