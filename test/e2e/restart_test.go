package e2e

import (
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// restartZone is a control plane whose deregistration delay is long
// enough that "serving while kuma-cp still holds the old stream" is a
// fact of order, not of speed, with kuma-cp's ratio of delay to cache
// expiration.
func restartZone(t *testing.T) *harness.Zone {
	return harness.NewZoneWith(t, bins, controlplane.Options{Meshes: []string{"payments"},
		DeregistrationDelay: 5 * time.Second, CacheExpiration: 500 * time.Millisecond})
}

// onlyDataplane is the one Dataplane of mesh payments.
func onlyDataplane(t *testing.T, zone *harness.Zone) controlplane.DataplaneRecord {
	t.Helper()
	var dp controlplane.DataplaneRecord
	harness.Eventually(t, promptly, "the Dataplane to be registered", func() bool {
		dps := zone.CP.Dataplanes("payments")
		if len(dps) == 1 {
			dp = dps[0]
		}
		return len(dps) == 1
	})
	return dp
}

// agentStatus is the running agent's GET /status.
type agentStatus struct {
	Phase        string
	Detail       string
	ControlPlane struct{ State, Says string }
}

func statusOf(t *testing.T, p harness.Proxy) agentStatus {
	t.Helper()
	code, body := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/status")
	var st agentStatus
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("/status: %d %q: %v", code, body, err)
	}
	return st
}

// Any restart while the control plane is up: kuma-cp refuses the node's
// new stream until it has deregistered the old one. The proxy serves its
// cache meanwhile and says so; kuma-cp's Dataplane comes back within a
// few hundred milliseconds of its release; Envoy goes on to the live
// configuration on the stream kuma-cp accepts, without a reconnect.
func TestRestartServesTheCacheWhileKumaCPHoldsTheOldStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, role string
		disrupt    func(t *testing.T, agent *harness.Agent)
		exit       int
	}{
		{"planned restart of an ingress", "ingress", func(t *testing.T, a *harness.Agent) { a.Signal(syscall.SIGTERM) }, 0},
		{"planned restart of an egress", "egress", func(t *testing.T, a *harness.Agent) { a.Signal(syscall.SIGTERM) }, 0},
		{"agent killed", "egress", func(t *testing.T, a *harness.Agent) { a.Signal(syscall.SIGKILL) }, -1},
		{"Envoy crashed", "egress", func(t *testing.T, a *harness.Agent) {
			if err := syscall.Kill(a.EnvoyPID(promptly), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zone := restartZone(t)
			p := zone.NewProxy("payments", tc.role)
			agent := zone.Start(p, nil)
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			awaitCached(t, p)
			dp := onlyDataplane(t, zone)
			node := dp.Mesh + "." + dp.Name
			before := zone.CP.NodeStream(node)

			disrupted := time.Now()
			tc.disrupt(t, agent)
			if code := agent.Wait(promptly); code != tc.exit {
				t.Fatalf("exit %d, want %d\n%s", code, tc.exit, agent.Output())
			}
			again := zone.Start(p, nil)
			again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			envoyPID := again.EnvoyPID(promptly)

			// Serving, from the cache, while kuma-cp still holds the old stream.
			held := zone.CP.NodeStream(node)
			if held.DeregisteringSince == nil {
				t.Fatalf("READY only once kuma-cp let go of the old stream (%+v)\n%s", held, again.Output())
			}
			if code, body := readinessBody(t, p); code != 200 || !strings.Contains(body, "serving the cached configuration") || !strings.Contains(body, "kuma-cp still holds the stream of this proxy's previous run") {
				t.Fatalf("readiness %d %q, want READY saying kuma-cp holds the previous stream", code, body)
			}
			if st := statusOf(t, p); st.ControlPlane.State != "held" {
				t.Fatalf("/status says %+v", st)
			}
			if strings.Contains(again.Output(), "\tERROR\t") {
				t.Errorf("a restart logged an error:\n%s", again.Output())
			}

			// Live again on the stream kuma-cp accepts: no second stream, no
			// Envoy restart.
			harness.Eventually(t, promptly, "the live configuration", func() bool {
				code, body := readinessBody(t, p)
				return code == 200 && !strings.Contains(body, "cached")
			})
			if again.EnvoyPID(promptly) != envoyPID {
				t.Fatal("Envoy was restarted to get back to the live configuration")
			}
			after := zone.CP.NodeStream(node)
			if got := after.Accepted - before.Accepted; got != 1+boolInt(tc.role == "egress" && tc.exit == 0) {
				t.Fatalf("kuma-cp accepted %d streams of this node since the restart, want the resumed one (and a stopping egress's withdrawal)\n%s", got, again.Output())
			}
			if st := statusOf(t, p); st.ControlPlane.State != "connected" {
				t.Fatalf("/status says %+v", st)
			}

			// kuma-cp had a Dataplane all along but for short gaps.
			for _, g := range controlplane.DataplaneGaps(zone.CP.DataplaneTimeline(dp.Mesh, dp.Name), disrupted, time.Now()) {
				if g.Duration() > time.Second {
					t.Errorf("kuma-cp had no Dataplane for %s (from %s)", g.Duration(), g.From.Format(time.RFC3339Nano))
				}
			}
			again.Signal(syscall.SIGKILL)
			again.Wait(promptly)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// awaitCached waits until p's configuration is on disk.
func awaitCached(t *testing.T, p harness.Proxy) {
	t.Helper()
	harness.Eventually(t, promptly, "the configuration to be cached", func() bool {
		_, err := os.Stat(cacheFile(p))
		return err == nil
	})
}

// A control plane that accepts connections and answers nothing: with a
// cache, a restarted proxy serves it within seconds, not after the 10 s a
// bootstrap attempt may take plus a TLS timeout; once the control plane
// answers again, Envoy is on the live configuration through the first
// stream kuma-cp accepts, without reconnecting.
func TestRestartWithAHungControlPlaneServesTheCacheSoon(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	p := zone.NewProxy("payments", "egress")
	agent := zone.Start(p, nil)
	agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	awaitCached(t, p)
	dp := onlyDataplane(t, zone)
	node := dp.Mesh + "." + dp.Name

	zone.CP.SetFaults(controlplane.Faults{Hang: true})
	kill(t, agent)
	started := time.Now()
	again := zone.Start(p, nil)
	again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("READY %s after the restart; a hung control plane should count as unreachable within 3 s, and Envoy be served the cache at once", took.Round(time.Millisecond))
	}
	if code, body := readinessBody(t, p); code != 200 || !strings.Contains(body, "serving the cached configuration") {
		t.Fatalf("readiness %d %q", code, body)
	}
	envoyPID := again.EnvoyPID(promptly)
	before := zone.CP.NodeStream(node)

	zone.CP.SetFaults(controlplane.Faults{})
	harness.Eventually(t, promptly, "the live configuration", func() bool {
		code, body := readinessBody(t, p)
		return code == 200 && !strings.Contains(body, "cached")
	})
	if got := zone.CP.NodeStream(node).Accepted - before.Accepted; got != 1 {
		t.Fatalf("kuma-cp accepted %d streams once it answered again, want one, carried on with\n%s", got, again.Output())
	}
	if again.EnvoyPID(promptly) != envoyPID {
		t.Fatal("Envoy was restarted")
	}
}

// sidecar connects, as a zone's sidecars do, only to the zone egresses
// the control plane hands out right now, with a TLS ClientHello, and
// counts what was refused.
type sidecar struct {
	zone    *harness.Zone
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	refused []string
	served  map[uint32]int
	total   atomic.Int64
}

func startSidecar(zone *harness.Zone) *sidecar {
	s := &sidecar{zone: zone, stop: make(chan struct{}), done: make(chan struct{}), served: map[uint32]int{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			set := zone.CP.ZoneEgresses("payments")
			if len(set) == 0 {
				continue
			}
			e := set[i%len(set)]
			addr := net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port)))
			c, err := harness.DialTLSHello(addr, controlplane.DestinationSNI("payments", "egress"))
			s.total.Add(1)
			s.mu.Lock()
			if err != nil {
				s.refused = append(s.refused, time.Now().Format(time.RFC3339Nano)+" "+addr+": "+err.Error())
			} else {
				s.served[e.Port]++
				c.Close()
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *sidecar) finish() ([]string, map[uint32]int) {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused, s.served
}

// A zone egress that stops, or drains for maintenance, leaves kuma-cp's
// egress set before its listeners close: a sidecar following that set
// never has a connection refused.
func TestEgressStopAndDrainRefuseNoSidecarConnection(t *testing.T) {
	t.Parallel()
	zone := harness.NewZone(t, bins, "payments")
	a := zone.NewProxy("payments", "egress")
	b := zone.NewProxy("payments", "egress")
	agentA := zone.Start(a, nil, "--name", "zp-egress-a")
	agentB := zone.Start(b, nil, "--name", "zp-egress-b")
	agentA.AwaitReadiness(a.Readiness, 200, "READY", promptly)
	agentB.AwaitReadiness(b.Readiness, 200, "READY", promptly)
	awaitCached(t, a)
	harness.Eventually(t, promptly, "both egresses handed out", func() bool { return len(zone.CP.ZoneEgresses("payments")) == 2 })

	car := startSidecar(zone)
	t.Cleanup(func() { car.finish() })
	await := func(what string, n int) {
		t.Helper()
		from := car.total.Load()
		harness.Eventually(t, promptly, what, func() bool { return car.total.Load() >= from+int64(n) })
	}
	await("sidecar traffic", 20)

	// A stops, and starts again.
	agentA.Signal(syscall.SIGTERM)
	harness.Eventually(t, promptly, "A's /status to say a stop is under way", func() bool {
		st, ok := tryStatus(a)
		return ok && st.Phase == "TERMINATING" && st.Stop == "stop"
	})
	if code := agentA.Wait(2 * promptly); code != 0 {
		t.Fatalf("A exited %d\n%s", code, agentA.Output())
	}
	if !strings.Contains(agentA.Output(), stopLog) || !strings.Contains(agentA.Output(), "kuma-cp took the zone egress out of its egress set") {
		t.Fatalf("A did not withdraw before it stopped:\n%s", agentA.Output())
	}
	await("sidecar traffic with A gone", 20)
	agentA = zone.Start(a, nil, "--name", "zp-egress-a")
	agentA.AwaitReadiness(a.Readiness, 200, "READY", promptly)
	harness.Eventually(t, promptly, "A handed out again", func() bool { return len(zone.CP.ZoneEgresses("payments")) == 2 })
	await("sidecar traffic with both", 20)

	// B drains for maintenance.
	if code, out := maintain(t, b, "drain"); code != 0 {
		t.Fatalf("zoneproxy drain: exit %d\n%s", code, out)
	}
	if st := statusOf(t, b); st.ControlPlane.State != "withdrawn" {
		t.Fatalf("B's /status after the drain: %+v", st)
	}
	await("sidecar traffic with B drained", 20)
	refused, served := car.finish()
	if len(refused) > 0 {
		t.Errorf("%d connections refused:\n%s", len(refused), strings.Join(refused, "\n"))
	}
	if served[uint32(a.Egress)] == 0 || served[uint32(b.Egress)] == 0 {
		t.Fatalf("the sidecar reached %v, want both egresses", served)
	}
	agentA.Signal(syscall.SIGKILL)
	agentB.Signal(syscall.SIGKILL)
}
