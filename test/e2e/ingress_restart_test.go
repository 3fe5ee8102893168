package e2e

import (
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

// A restart of a zone ingress behind a load balancer: /ready turns 503,
// the drain lasts --drain-min (the balancer's time to take it out) and
// then only while connections are open, so the balancer sends no remote
// zone's connection to a closed port. What the restart costs the remote
// zones is the time the balancer has no healthy ingress: reported.
func TestAnIngressRestartBehindALoadBalancerRefusesNothing(t *testing.T) {
	t.Parallel()
	for _, role := range []string{"ingress", "combined"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			zone := harness.NewZone(t, bins, "payments")
			p := zone.NewProxy("payments", role)
			// --drain-min above the balancer's time to take it out (3 probes, 1.5 s),
			// which is longer than the drain's quiet second.
			args := []string{"--drain-min", "3s", "--drain-time", "10s"}
			agent := zone.Start(p, nil, args...)
			agent.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			awaitCached(t, p)
			lb := startLoadBalancer(p)
			t.Cleanup(lb.finish)
			lb.awaitServed(t, 20)

			agent.Signal(syscall.SIGUSR1)
			if code := agent.Wait(promptly); code != 0 {
				t.Fatalf("exit %d, want 0\n%s", code, agent.Output())
			}
			if !strings.Contains(agent.Output(), "Envoy drains as for a stop, so that a load balancer sees the failing health check") {
				t.Fatalf("the restart was not told apart:\n%s", agent.Output())
			}
			again := zone.Start(p, nil, args...)
			again.AwaitReadiness(p.Readiness, 200, "READY", promptly)
			lb.awaitServed(t, 20)
			lb.finish()
			out, refused := lb.result()
			t.Logf("%s restart: the balancer had no healthy ingress for %s (probing /ready every %s, out after %d failures, in after %d passes; --drain-min 3s); %d connections refused",
				role, out.Round(10*time.Millisecond), lbProbeEvery, lbThreshold, lbThreshold, len(refused))
			if len(refused) > 0 {
				t.Errorf("the balancer sent %d connections to a closed port:\n%s", len(refused), strings.Join(refused, "\n"))
			}
			again.Signal(syscall.SIGKILL)
			again.Wait(promptly)
		})
	}
}

// The load balancer's health check, slower than the drain's quiet second.
const (
	lbProbeEvery = 500 * time.Millisecond
	lbThreshold  = 3
)

// loadBalancer follows an ingress's /ready as a cloud load balancer does
// (out after lbThreshold failing probes, in after as many passing) and
// sends a remote zone's connection to it every 20 ms while it counts it
// healthy.
type loadBalancer struct {
	stop, done chan struct{}
	once       sync.Once
	mu         sync.Mutex
	healthy    bool
	outSince   time.Time
	out        time.Duration
	served     int
	refused    []string
}

func startLoadBalancer(p harness.Proxy) *loadBalancer {
	lb := &loadBalancer{stop: make(chan struct{}), done: make(chan struct{})}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Ingress))
	probe := &http.Client{Timeout: lbProbeEvery}
	go func() {
		defer close(lb.done)
		conn, check := time.NewTicker(20*time.Millisecond), time.NewTicker(lbProbeEvery)
		defer conn.Stop()
		defer check.Stop()
		streak := 0 // probes in a row that disagree with the state
		for {
			select {
			case <-lb.stop:
				return
			case <-check.C:
				ok := false
				if resp, err := probe.Get("http://127.0.0.1:" + strconv.Itoa(p.Readiness) + "/ready"); err == nil {
					ok = resp.StatusCode == 200
					resp.Body.Close()
				}
				lb.mu.Lock()
				if ok == lb.healthy {
					streak = 0
				} else if streak++; streak >= lbThreshold {
					lb.flip(ok)
					streak = 0
				}
				lb.mu.Unlock()
			case <-conn.C:
				lb.mu.Lock()
				healthy := lb.healthy
				lb.mu.Unlock()
				if !healthy {
					continue
				}
				c, err := harness.DialTLSHello(addr, controlplane.DestinationSNI("payments", "ingress"))
				lb.mu.Lock()
				if err != nil {
					lb.refused = append(lb.refused, time.Now().Format(time.RFC3339Nano)+": "+err.Error())
				} else {
					lb.served++
					c.Close()
				}
				lb.mu.Unlock()
			}
		}
	}()
	return lb
}

// flip changes the balancer's view; the time out of it is added up.
func (lb *loadBalancer) flip(healthy bool) {
	now := time.Now()
	if healthy && !lb.outSince.IsZero() {
		lb.out += now.Sub(lb.outSince)
	}
	if !healthy {
		lb.outSince = now
	}
	lb.healthy = healthy
}

func (lb *loadBalancer) awaitServed(t *testing.T, n int) {
	t.Helper()
	awaitMore(t, "remote zones' connections through the balancer", func() int {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		return lb.served
	}, n)
}

func (lb *loadBalancer) finish() {
	lb.once.Do(func() { close(lb.stop) })
	<-lb.done
}

func (lb *loadBalancer) result() (time.Duration, []string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.out, lb.refused
}
