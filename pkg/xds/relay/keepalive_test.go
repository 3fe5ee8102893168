package relay

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	grpcstatus "google.golang.org/grpc/status"
)

// grpcMinPingTime is the shortest keepalive Time grpc-go lets a client use
// (internal.KeepaliveMinPingTime): the tests below ping that often and
// scale kuma-cp's policy by the same factor.
const grpcMinPingTime = 10 * time.Second

// testKeepalive is upstreamKeepalive as short as grpc-go allows; the
// timeout is short too, yet ample for a ping on loopback.
var testKeepalive = keepalive.ClientParameters{Time: grpcMinPingTime, Timeout: 3 * time.Second}

var shortenKeepalive sync.Once

// useTestKeepalive shortens the relay's keepalive for the parallel tests
// here. They run after every other test of the package has ended, and all
// want the same values, so it is set once and left so.
func useTestKeepalive(t *testing.T) {
	t.Helper()
	t.Parallel()
	shortenKeepalive.Do(func() { upstreamKeepalive = testKeepalive })
}

// scaled is d of kuma-cp's timings in the tests' time, where the relay's
// keepalive Time is grpcMinPingTime instead of upstreamKeepaliveTime.
func scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * float64(grpcMinPingTime) / float64(upstreamKeepaliveTime))
}

// pausableProxy forwards TCP between the relay and a control plane until
// frozen; then no byte moves either way, as when kuma-cp is stopped with
// SIGSTOP: the connection stays up (the kernel, not the proxy, answers TCP
// keepalive probes) and nothing is answered.
type pausableProxy struct {
	addr string

	mu     sync.Mutex
	thawed chan struct{} // closed while bytes flow
	// chunks counts the reads, by direction, that carried bytes: "up" is
	// relay to control plane.
	chunks map[string]int
}

func startPausableProxy(t *testing.T, target string) *pausableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausableProxy{addr: ln.Addr().String(), thawed: make(chan struct{}), chunks: map[string]int{}}
	close(p.thawed)
	var conns []net.Conn
	var connsMu sync.Mutex
	keep := func(c net.Conn) {
		connsMu.Lock()
		conns = append(conns, c)
		connsMu.Unlock()
	}
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			keep(down)
			keep(up)
			go p.pipe("up", up, down)
			go p.pipe("down", down, up)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.thaw()
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return p
}

// pipe copies src to dst, holding what it read while frozen.
func (p *pausableProxy) pipe(dir string, dst io.Writer, src io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.chunks[dir]++
			thawed := p.thawed
			p.mu.Unlock()
			<-thawed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *pausableProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

func (p *pausableProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *pausableProxy) count(dir string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.chunks[dir]
}

// answerOnceAndHold is a control plane that answers the first request and
// then only reads.
func answerOnceAndHold(t *testing.T) func(s *cpStream) error {
	return func(s *cpStream) error {
		if _, err := s.recv(); err != nil {
			return nil
		}
		return s.answerAndHold(mustMarshal(t, deltaResponse(t, clusterType, "1", "n1", "c")))
	}
}

// A control plane that stops answering while it serves (its process
// stopped, its host frozen) is noticed within the keepalive time and
// timeout: the relay reports it unreachable and Envoy's stream ends, so
// that the cache can serve Envoy meanwhile.
func TestRelayNoticesAControlPlaneThatStopsAnswering(t *testing.T) {
	useTestKeepalive(t)
	p := newPKI(t)
	cp := startFakeCP(t, p, "", answerOnceAndHold(t))
	proxy := startPausableProxy(t, cp.addr)
	ev := newEvents()
	r := startRelay(t, p, proxy.addr, staticToken("tok"), ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	envoy.recvDelta()
	if st := r.State(); st.Upstream.State != Connected {
		t.Fatalf("upstream %q before the freeze, want connected", st.Upstream.State)
	}

	proxy.freeze()
	frozen := time.Now()
	ev.await(t, "the control plane reported unreachable", func(e *events) bool {
		return len(e.errs) > 0 && e.errs[len(e.errs)-1].Unreachable
	})
	took := time.Since(frozen)
	// Slack for a loaded host; the relay's own keepalive (20 s + 20 s)
	// would still miss it.
	if limit := testKeepalive.Time + testKeepalive.Timeout + 10*time.Second; took > limit {
		t.Errorf("noticed after %s, want within the keepalive time and timeout (%s)", took.Round(time.Millisecond), limit)
	}
	if st := r.State(); st.Upstream.State != Unreachable || st.LastError == nil || st.LastError.Code != codes.Unavailable {
		t.Fatalf("state %+v, want the control plane unreachable", st)
	}
	// Without a cache, Envoy's stream ends and Envoy reconnects.
	if _, err := envoy.recv(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("Envoy's stream ended with %v, want Unavailable", err)
	}
	t.Logf("noticed after %s: %s", took.Round(time.Millisecond), r.State().LastError.Message)
}

// The relay's pings respect the policy kuma-cp's DP server enforces: over
// an idle stream of four pings and more (one past the three offences after
// which it sends GOAWAY too_many_pings), the stream stays up, whether
// kuma-cp pings too (it does: every 15 s of silence) or the relay is the
// only one to ping (a proxy in between that does not forward pings). A
// stream whose control plane says nothing for that long is not ended
// either: only an unanswered ping ends it.
func TestKeepaliveStaysWithinKumaCPEnforcementPolicy(t *testing.T) {
	useTestKeepalive(t)
	policy := grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: scaled(kumaKeepaliveMinTime), PermitWithoutStream: true})
	tests := []struct {
		name   string
		server []grpc.ServerOption
		// relayPings: the relay's own pings are what the server sees.
		relayPings bool
	}{
		{name: "only the relay pings", server: []grpc.ServerOption{policy}, relayPings: true},
		{name: "kuma-cp pings too", server: []grpc.ServerOption{policy,
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: scaled(kumaKeepaliveMinTime), Timeout: scaled(kumaKeepaliveMinTime)})}},
	}
	// Side by side, without waiting for a parallel slot: each idles a while.
	var wg sync.WaitGroup
	for _, tt := range tests {
		wg.Go(func() {
			t.Run(tt.name, func(t *testing.T) {
				p := newPKI(t)
				cp := startFakeCP(t, p, "", answerOnceAndHold(t), tt.server...)
				proxy := startPausableProxy(t, cp.addr)
				ev := newEvents()
				r := startRelay(t, p, proxy.addr, staticToken("tok"), ev)
				envoy := dialEnvoy(t, r, deltaMethod)
				envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
				envoy.recvDelta()
				cps := cp.nextStream(t)
				upBefore := proxy.count("up")

				idle := 4*testKeepalive.Time + testKeepalive.Time/2
				select {
				case <-cps.Context().Done():
					t.Fatalf("the control plane's stream ended while idle: %v", cps.Context().Err())
				case <-time.After(idle):
				}
				ev.mu.Lock()
				errs := append([]StreamError(nil), ev.errs...)
				ev.mu.Unlock()
				if len(errs) > 0 {
					t.Fatalf("the stream failed while idle: %v", errs)
				}
				if st := r.State(); st.Upstream.State != Connected {
					t.Fatalf("upstream %q after %s idle, want connected", st.Upstream.State, idle)
				}
				// Not vacuous: the relay did ping, more often than kuma-cp tolerates offences.
				if pings := proxy.count("up") - upBefore; tt.relayPings && pings < 4 {
					t.Fatalf("the relay sent %d times in %s idle, want a ping every %s", pings, idle, testKeepalive.Time)
				}
			})
		})
	}
	wg.Wait()
}

// The relay's keepalive is kuma-cp's to tolerate: no more often than its
// MinTime, with room for timer jitter, and long enough a timeout for a busy
// control plane's transport to answer.
func TestUpstreamKeepaliveRespectsKumaCPMinTime(t *testing.T) {
	if upstreamKeepaliveTime < kumaKeepaliveMinTime+kumaKeepaliveMinTime/4 {
		t.Errorf("the relay pings after %s of silence; kuma-cp refuses pings closer than %s (with a quarter for jitter)", upstreamKeepaliveTime, kumaKeepaliveMinTime)
	}
	if upstreamKeepaliveTimeout < kumaKeepaliveMinTime {
		t.Errorf("a ping unanswered for %s ends the stream: shorter than kuma-cp's own %s", upstreamKeepaliveTimeout, kumaKeepaliveMinTime)
	}
	if got := upstreamKeepaliveTime + upstreamKeepaliveTimeout; got > 45*time.Second {
		t.Errorf("a hung control plane goes unnoticed for up to %s", got)
	}
}
