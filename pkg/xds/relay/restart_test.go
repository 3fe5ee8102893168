package relay

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// heldCP refuses every stream with kuma-cp's "already an active stream"
// until release is closed, then answers like versionedCP. It counts the
// TCP connections it accepted.
type heldCP struct {
	*fakeCP
	release chan struct{}
	cpv     *versionedCP
	conns   atomic.Int32
	firsts  chan *discoveryv3.DeltaDiscoveryRequest
}

func startHeldCP(t *testing.T, p *pki) *heldCP {
	h := &heldCP{release: make(chan struct{}), cpv: &versionedCP{version: "v2"}, firsts: make(chan *discoveryv3.DeltaDiscoveryRequest, 1000)}
	answer := h.cpv.script(t)
	h.fakeCP = startFakeCP(t, p, "", func(s *cpStream) error {
		select {
		case <-h.release:
			return answer(s)
		default:
		}
		b, err := s.recv()
		if err != nil {
			return nil
		}
		h.firsts <- decodeDeltaRequest(t, b)
		return alreadyActiveStream()
	}, grpc.StatsHandler(&connCounter{n: &h.conns}))
	return h
}

// cacheOf stores clusters and listeners of version v1 for the relay.
func cacheOf(t *testing.T) *lkgcache.Cache {
	t.Helper()
	cache := openCache(t, t.TempDir())
	t.Cleanup(func() { _ = cache.Close(context.Background()) })
	cache.Store([]lkgcache.TypeState{
		{TypeURL: clusterType, Resources: []lkgcache.Resource{{Name: "Cluster-v1", Version: "v1", TypeURL: clusterType, Body: listener(t, "Cluster-v1", 0).GetValue()}}},
		{TypeURL: listenerType, Resources: []lkgcache.Resource{{Name: "Listener-v1", Version: "v1", TypeURL: listenerType, Body: listener(t, "Listener-v1", 0).GetValue()}}},
	})
	return cache
}

// After a restart kuma-cp refuses the node's new stream until it has
// deregistered the old one. Envoy is served the cache at once, the relay
// asks again every few hundred milliseconds on one connection, and once
// kuma-cp accepts, Envoy carries on with that stream: no reconnect, the
// versions Envoy holds sent along, the cached state cleared.
func TestHeldStreamIsServedFromTheCacheAndResumed(t *testing.T) {
	p := newPKI(t)
	cp := startHeldCP(t, p)
	ev := newEvents()
	var ups []Upstream
	var upMu sync.Mutex
	r := startRelay(t, p, cp.addr, staticToken("tok"), ev, func(o *Options) {
		o.Cache = cacheOf(t)
		hooks := o.Events
		hooks.Upstream = func(u Upstream) { upMu.Lock(); ups = append(ups, u); upMu.Unlock(); ev.changed <- struct{}{} }
		o.Events = hooks
	})
	envoy := dialEnvoy(t, r, deltaMethod)
	clusters := subscribe(t, envoy, clusterType, nil)
	listeners := subscribe(t, envoy, listenerType, nil)
	if clusters.GetResources()[0].GetName() != "Cluster-v1" || listeners.GetResources()[0].GetName() != "Listener-v1" {
		t.Fatalf("Envoy was not served the cache: %v %v", clusters, listeners)
	}
	ev.await(t, "the cache in use, held", func(e *events) bool { return len(e.cache) == 1 && e.cache[0].InUse && e.cache[0].Held })
	if st := r.State(); st.Upstream.State != Held {
		t.Fatalf("upstream %+v", st.Upstream)
	}
	// A few refused attempts, then kuma-cp lets go.
	var gaps []time.Duration
	last := time.Now()
	for range 4 {
		<-cp.firsts
		gaps = append(gaps, time.Since(last))
		last = time.Now()
	}
	close(cp.release)
	for range 2 {
		resp := envoy.recvDelta() // the same stream
		if !strings.HasSuffix(resp.GetResources()[0].GetName(), "-v2") {
			t.Fatalf("resumed with %v", resp)
		}
		envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	ev.await(t, "the cached state to clear", func(e *events) bool { return !e.cache[len(e.cache)-1].InUse })
	for _, g := range gaps[1:] {
		if g > time.Second {
			t.Errorf("refused attempts %v apart, want a few hundred milliseconds", gaps)
		}
	}
	if n := cp.conns.Load(); n != 1 {
		t.Errorf("%d connections for the refused attempts and the accepted stream, want one kept", n)
	}
	upMu.Lock()
	defer upMu.Unlock()
	if len(ups) != 2 || ups[0].State != Held || ups[1].State != Connected {
		t.Errorf("upstream states %v, want held then connected", ups)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, e := range ev.errs {
		if !e.Held {
			t.Errorf("reported %v besides the held refusals", e)
		}
	}
	if m := metricsText(r); strings.Contains(m, `zoneproxy_xds_stream_errors_total{`) || !strings.Contains(m, `zoneproxy_xds_upstream{state="connected"} 1`) {
		t.Errorf("metrics:\n%s", m)
	}
}

// Started on the cache because the control plane did not answer, Envoy's
// first stream is served at once, before any attempt upstream.
func TestCacheFirstServesEnvoyBeforeTryingTheControlPlane(t *testing.T) {
	p := newPKI(t)
	hung := hangingListener(t)
	r := startRelay(t, p, hung, staticToken("tok"), nil, func(o *Options) {
		o.Cache = cacheOf(t)
		o.CacheFirst = true
		o.ConnectTimeout = time.Minute // a hung control plane would hold Envoy this long
	})
	envoy := dialEnvoy(t, r, deltaMethod)
	start := time.Now()
	if resp := subscribe(t, envoy, clusterType, nil); resp.GetResources()[0].GetName() != "Cluster-v1" {
		t.Fatalf("Envoy got %v", resp)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the cache was served after %s", took)
	}
	if st := r.State(); !st.Cache.InUse || st.Upstream.State != Unreachable {
		t.Fatalf("state %+v, want the cache in use and the control plane unreachable", st)
	}
}

// hangingListener accepts TCP connections and never answers, as a stopped
// control plane's kernel does.
func hangingListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A withdrawal closes the proxy's stream and opens one whose node the
// caller marked, retried while kuma-cp still holds the old one; Envoy's
// stream stays open and gets nothing more.
func TestWithdrawReregistersTheMarkedNode(t *testing.T) {
	p := newPKI(t)
	var streams atomic.Int32
	firsts := make(chan *discoveryv3.DeltaDiscoveryRequest, 10)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		b, err := s.recv()
		if err != nil {
			return nil
		}
		n := streams.Add(1)
		firsts <- decodeDeltaRequest(t, b)
		if n == 2 || n == 3 { // the old stream is still being deregistered
			return alreadyActiveStream()
		}
		return s.answerAndHold(mustMarshal(t, deltaResponse(t, clusterType, "1", "n1", "c")))
	})
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
	envoy := dialEnvoy(t, r, deltaMethod)
	withMeta := proto.Clone(node).(*corev3.Node)
	withMeta.Metadata, _ = structpb.NewStruct(map[string]any{"dataplane.resource": "ready"})
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: withMeta, TypeUrl: clusterType})
	resp := envoy.recvDelta()
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: resp.GetNonce()})
	<-firsts

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := r.Withdraw(ctx, func(n *corev3.Node) error {
		n.GetMetadata().GetFields()["dataplane.resource"] = structpb.NewStringValue("not ready")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 4; i++ {
		req := <-firsts
		if got := req.GetNode().GetMetadata().GetFields()["dataplane.resource"].GetStringValue(); got != "not ready" || req.GetNode().GetId() != node.GetId() {
			t.Fatalf("stream %d opened with node %v", i, req.GetNode())
		}
	}
	if st := r.State().Upstream.State; st != Withdrawn {
		t.Fatalf("upstream %s", st)
	}
	// Envoy's stream is parked, not ended: a request gets no answer and no error.
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType})
	got := make(chan error, 1)
	go func() { _, err := envoy.recv(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("Envoy's stream got %v while withdrawn", err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := streams.Load(); n != 4 {
		t.Fatalf("%d streams, want the first, two refused and the withdrawn one", n)
	}
}

// connCounter counts the connections a gRPC server accepted.
type connCounter struct{ n *atomic.Int32 }

func (c *connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c *connCounter) HandleRPC(context.Context, stats.RPCStats)                       {}
func (c *connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c *connCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnBegin); ok {
		c.n.Add(1)
	}
}

// Refusals that go on far past any deregistration delay are another
// proxy with this name, not a restart: the relay says so, and slows down
// to its backoff.
func TestEndlessRefusalsAreAnotherProxyWithTheName(t *testing.T) {
	defer func(p time.Duration) { heldPatience = p }(heldPatience)
	heldPatience = 300 * time.Millisecond
	p := newPKI(t)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		if _, err := s.recv(); err != nil {
			return nil
		}
		return alreadyActiveStream()
	})
	ev := newEvents()
	r := startRelay(t, p, cp.addr, staticToken("tok"), ev, func(o *Options) {
		o.Backoff.Initial, o.Backoff.Max = time.Second, 2*time.Second
	})
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	ev.await(t, "a retry at the backoff", func(e *events) bool {
		return len(e.errs) > 0 && e.errs[len(e.errs)-1].Next >= 250*time.Millisecond && e.errs[len(e.errs)-1].Next > heldRetryMax
	})
	if st := r.State().Upstream.State; st != AnotherProxy {
		t.Fatalf("upstream %s, want %s", st, AnotherProxy)
	}
}

// While kuma-cp holds the stream and no cache may be served, the relay
// asks again every few hundred milliseconds but says why not once.
func TestHeldWithoutACacheIsSaidOnce(t *testing.T) {
	p := newPKI(t)
	cp := startHeldCP(t, p)
	core, logs := zapobserver.New(zap.InfoLevel)
	cache := openCache(t, t.TempDir()) // empty: nothing to serve
	t.Cleanup(func() { _ = cache.Close(context.Background()) })
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil, func(o *Options) { o.Cache, o.Log = cache, zap.New(core) })
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	for range 4 {
		<-cp.firsts
	}
	close(cp.release)
	if resp := envoy.recvDelta(); resp.GetTypeUrl() != clusterType {
		t.Fatalf("Envoy got %v", resp)
	}
	if n := logs.FilterMessageSnippet("cannot be served meanwhile").Len(); n != 1 {
		t.Fatalf("said %d times why the cache is not served, want once", n)
	}
	if n := logs.FilterMessageSnippet("unreachable").Len(); n != 0 {
		t.Fatalf("a held stream was called unreachable %d times", n)
	}
}
