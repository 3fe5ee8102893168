package relay

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// versionedCP answers every subscription with one resource per type named
// "<short type>-<version>", as a delta control plane would.
type versionedCP struct {
	mu       sync.Mutex
	version  string
	bodies   map[string][]byte // resource name -> body sent
	requests [][]byte          // every request received, in order
}

// requestsSince awaits and returns the requests received after the first
// `from`, at least n of them.
func (v *versionedCP) requestsSince(t testing.TB, from, n int) [][]byte {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		v.mu.Lock()
		got := append([][]byte(nil), v.requests[min(from, len(v.requests)):]...)
		v.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the control plane got %d requests, want %d", len(got), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (v *versionedCP) received() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.requests)
}

// streamCount is how many streams the fake control plane opened.
func (cp *fakeCP) streamCount() int {
	n := 0
	for _, e := range cp.log() {
		if strings.HasPrefix(e, "open ") {
			n++
		}
	}
	return n
}

func (v *versionedCP) script(t testing.TB) func(s *cpStream) error {
	return func(s *cpStream) error {
		for n := 0; ; n++ {
			b, err := s.recv()
			if err != nil {
				return nil
			}
			req := decodeDeltaRequest(t, b)
			v.mu.Lock()
			v.requests = append(v.requests, b)
			v.mu.Unlock()
			if req.GetResponseNonce() != "" {
				continue
			}
			v.mu.Lock()
			name := shortType(req.GetTypeUrl()) + "-" + v.version
			resp := deltaResponse(t, req.GetTypeUrl(), v.version, name+"-nonce", name)
			if old := req.GetInitialResourceVersions(); len(old) > 0 {
				for held := range old {
					if held != name {
						resp.RemovedResources = append(resp.RemovedResources, held)
					}
				}
			}
			if v.bodies == nil {
				v.bodies = map[string][]byte{}
			}
			v.bodies[name] = resp.Resources[0].GetResource().GetValue()
			v.mu.Unlock()
			if err := s.send(mustMarshal(t, resp)); err != nil {
				return nil
			}
		}
	}
}

// subscribe asks for a wildcard type and ACKs the answer.
func subscribe(t *testing.T, c *envoyClient, typ string, initial map[string]string) *discoveryv3.DeltaDiscoveryResponse {
	t.Helper()
	c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typ, InitialResourceVersions: initial})
	resp := c.recvDelta()
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: resp.GetNonce()})
	return resp
}

func metricsText(r *Relay) string {
	var b strings.Builder
	r.WriteMetrics(&b)
	return b.String()
}

// The outage story at the relay's level: configuration ACKed
// once is served after a restart while the control plane is down; when it
// returns, the relay opens the stream itself with what Envoy holds, and
// Envoy carries on with it, on the same stream: it resynchronises without
// reconnecting, and the cached state clears.
func TestOutageIsServedFromTheCacheUntilTheControlPlaneReturns(t *testing.T) {
	p := newPKI(t)
	stateDir := t.TempDir()
	cpv := &versionedCP{version: "v1"}
	cp := startFakeCP(t, p, "", cpv.script(t))
	addr := cp.addr

	// First life: Envoy gets clusters and listeners from the control plane.
	cache1 := openCache(t, stateDir)
	ev1 := newEvents()
	r1 := startRelay(t, p, addr, staticToken("tok"), ev1, func(o *Options) { o.Cache = cache1 })
	e1 := dialEnvoy(t, r1, deltaMethod)
	subscribe(t, e1, clusterType, nil)
	subscribe(t, e1, listenerType, nil)
	ev1.await(t, "both ACKs", func(e *events) bool { return len(e.accepts) == 2 })
	r1.Close()
	if err := cache1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	cp.server.Stop()

	// Restart with the control plane down.
	cache2 := openCache(t, stateDir)
	t.Cleanup(func() { _ = cache2.Close(context.Background()) })
	ev := newEvents()
	r := startRelay(t, p, addr, staticToken("tok"), ev, func(o *Options) { o.Cache = cache2 })
	envoy := dialEnvoy(t, r, deltaMethod)
	clusters := subscribe(t, envoy, clusterType, nil)
	listeners := subscribe(t, envoy, listenerType, nil)
	for _, resp := range []*discoveryv3.DeltaDiscoveryResponse{clusters, listeners} {
		if len(resp.GetResources()) != 1 {
			t.Fatalf("cached %s: %v", resp.GetTypeUrl(), resp.GetResources())
		}
		res := resp.GetResources()[0]
		if want := cpv.bodies[res.GetName()]; res.GetVersion() != "v1" || !bytes.Equal(res.GetResource().GetValue(), want) {
			t.Fatalf("cached %s %q version %q differs from what the control plane sent", resp.GetTypeUrl(), res.GetName(), res.GetVersion())
		}
	}
	ev.await(t, "cached configuration in use", func(e *events) bool { return len(e.cache) == 1 && e.cache[0].InUse })
	if m := metricsText(r); !strings.Contains(m, "zoneproxy_xds_cached_config 1") {
		t.Fatalf("metrics:\n%s", m)
	}
	if st := r.State(); !st.Cache.InUse || st.Cache.WrittenAt.IsZero() || st.LastError == nil || !st.LastError.Unreachable {
		t.Fatalf("state %+v", st)
	}

	// The control plane returns with new configuration.
	cpv.mu.Lock()
	cpv.version = "v2"
	cpv.mu.Unlock()
	before := cpv.received()
	cp2 := startFakeCP(t, p, addr, cpv.script(t))
	opened := cpv.requestsSince(t, before, 2)
	// The resumed stream opens as Envoy's own reconnect would: clusters,
	// then listeners, each with the versions Envoy holds.
	for i, want := range []struct {
		typ     string
		initial map[string]string
	}{{clusterType, map[string]string{"Cluster-v1": "v1"}}, {listenerType, map[string]string{"Listener-v1": "v1"}}} {
		req := decodeDeltaRequest(t, opened[i])
		if req.GetTypeUrl() != want.typ || !maps.Equal(req.GetInitialResourceVersions(), want.initial) || (i == 0) != (req.GetNode().GetId() != "") {
			t.Fatalf("resumed request %d: %v", i, req)
		}
	}
	for range 2 {
		resp := envoy.recvDelta() // on the same stream: no reconnect
		if len(resp.GetResources()) != 1 || !strings.HasSuffix(resp.GetResources()[0].GetName(), "-v2") || len(resp.GetRemovedResources()) != 1 {
			t.Fatalf("resynchronised with %v", resp)
		}
		envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	ev.await(t, "the cached state to clear", func(e *events) bool { return len(e.cache) == 2 && !e.cache[1].InUse })
	if n := cp2.streamCount(); n != 1 {
		t.Fatalf("the control plane saw %d streams, want the one resumed", n)
	}
	if m := metricsText(r); !strings.Contains(m, "zoneproxy_xds_cached_config 0") {
		t.Fatalf("metrics:\n%s", m)
	}
	// The relay's observer reads the last ACK behind forwarding.
	for typ, want := range map[string]string{clusterType: "Cluster-v2", listenerType: "Listener-v2"} {
		testutil.Eventually(t, waitLimit, "the relay's view of what Envoy holds to be "+want, func() bool {
			names := r.Names(typ)
			return len(names) == 1 && names[0] == want
		})
	}
}

// A control plane that answers with a refusal is not an outage: the cache
// is not served.
func TestRefusalIsNeverServedFromTheCache(t *testing.T) {
	p := newPKI(t)
	cache := openCache(t, t.TempDir())
	t.Cleanup(func() { _ = cache.Close(context.Background()) })
	cache.Store([]lkgcache.TypeState{{TypeURL: clusterType, Resources: []lkgcache.Resource{{Name: "c", TypeURL: clusterType}}}})
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		_, _ = s.recv()
		return grpcstatus.Error(codes.Unknown, "authentication failed: requires a workload-bound token")
	})
	ev := newEvents()
	r := startRelay(t, p, cp.addr, staticToken("tok"), ev, func(o *Options) { o.Cache = cache })
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	if _, err := envoy.recv(); grpcstatus.Code(err) != codes.Unknown {
		t.Fatalf("Envoy got %v, want the control plane's refusal", err)
	}
	if st := r.State(); st.Cache.InUse {
		t.Fatal("the cache was served after a refusal")
	}
}

// A cache that may not be served (here: too old) leaves Envoy's stream
// failing as without a cache.
func TestUnusableCacheIsNotServed(t *testing.T) {
	p := newPKI(t)
	now := time.Now()
	cache, err := lkgcache.Open(lkgcache.Options{Dir: t.TempDir(), MaxAge: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cache.Close(context.Background()) })
	cache.Store([]lkgcache.TypeState{{TypeURL: clusterType, Resources: []lkgcache.Resource{{Name: "c", TypeURL: clusterType}}}})
	now = now.Add(2 * time.Hour)
	r := startRelay(t, p, closedAddr(t), staticToken("tok"), nil, func(o *Options) { o.Cache = cache })
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	if _, err := envoy.recv(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("Envoy got %v", err)
	}
}

// State-of-the-world Envoys are served from the cache too, by the names
// they ask for.
func TestStateOfTheWorldIsServedFromTheCache(t *testing.T) {
	p := newPKI(t)
	cache := openCache(t, t.TempDir())
	t.Cleanup(func() { _ = cache.Close(context.Background()) })
	var rs []lkgcache.Resource
	for _, n := range []string{"a", "b"} {
		rs = append(rs, lkgcache.Resource{Name: n, Version: "1", TypeURL: listenerType, Body: listener(t, n, 0).GetValue()})
	}
	cache.Store([]lkgcache.TypeState{{TypeURL: listenerType, Version: "v9", Resources: rs}})
	r := startRelay(t, p, closedAddr(t), staticToken("tok"), nil, func(o *Options) { o.Cache = cache })
	envoy := dialEnvoy(t, r, sotwMethod)
	envoy.send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: listenerType})
	all := envoy.recvSotw()
	if all.GetVersionInfo() != "v9" || len(all.GetResources()) != 2 {
		t.Fatalf("wildcard answer %v", all)
	}
	envoy.send(&discoveryv3.DiscoveryRequest{TypeUrl: listenerType, VersionInfo: "v9", ResponseNonce: all.GetNonce(), ResourceNames: []string{"b"}})
	only := envoy.recvSotw()
	if len(only.GetResources()) != 1 || mustName(t, only.GetResources()[0].GetValue()) != "b" {
		t.Fatalf("answer for [b]: %v", only)
	}
}

func mustName(t *testing.T, body []byte) string {
	t.Helper()
	l := &listenerv3.Listener{}
	if err := proto.Unmarshal(body, l); err != nil {
		t.Fatal(err)
	}
	return l.GetName()
}

// While Envoy runs from the cache, a reconnection attempt that the control
// plane ends cleanly, or that a new Envoy stream of the node takes over,
// is no refusal: nothing is reported. After a clean end the relay tries
// again and Envoy's stream carries on with the stream accepted next; a
// stream that was taken over ends as it would without the cache.
func TestCacheProbeEndsThatAreNoRefusal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		probe     func(s *cpStream) error // the control plane's end of the first attempt
		supersede bool                    // a new Envoy stream opens during the attempt
		code      codes.Code
		message   string
	}{
		{"ended cleanly by a control plane replica", func(*cpStream) error { return nil }, false, codes.OK, ""},
		{"taken over by a new Envoy stream", func(s *cpStream) error {
			for {
				if _, err := s.recv(); err != nil {
					return nil
				}
			}
		}, true, codes.Aborted, errSuperseded.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPKI(t)
			cache := openCache(t, t.TempDir())
			cache.Store([]lkgcache.TypeState{{TypeURL: clusterType, Version: "v1", Resources: []lkgcache.Resource{
				{Name: "c", Version: "1", TypeURL: clusterType, Body: listener(t, "c", 0).GetValue()}}}})
			var streams atomic.Int32
			cp := startFakeCP(t, p, "", func(s *cpStream) error {
				if _, err := s.recv(); err != nil {
					return nil
				}
				switch streams.Add(1) {
				case 1:
					return grpcstatus.Error(codes.Unavailable, "the control plane is starting")
				case 2:
					return tc.probe(s)
				}
				return s.answerAndHold(mustMarshal(t, deltaResponse(t, clusterType, "2", "n2", "c")))
			})
			ev := newEvents()
			r := startRelay(t, p, cp.addr, staticToken("tok"), ev, func(o *Options) { o.Cache = cache })
			envoy := dialEnvoy(t, r, deltaMethod)
			envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
			if resp := envoy.recvDelta(); resp.GetSystemVersionInfo() != "v1" {
				t.Fatalf("Envoy got %v, not the cached clusters", resp)
			}
			if tc.supersede {
				cp.nextStream(t)
				cp.nextStream(t) // the attempt, now waiting for an answer
				again := dialEnvoy(t, r, deltaMethod)
				again.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
				if resp := again.recvDelta(); resp.GetNonce() != "n2" {
					t.Fatalf("the new Envoy stream got %v", resp)
				}
			}
			if tc.code == codes.OK {
				if resp := envoy.recvDelta(); resp.GetNonce() != "n2" {
					t.Fatalf("Envoy's cached stream got %v, not the accepted stream's answer", resp)
				}
			} else {
				_, err := envoy.recv()
				if st := grpcstatus.Convert(err); st.Code() != tc.code || st.Message() != tc.message {
					t.Fatalf("Envoy's cached stream ended with %v", err)
				}
			}
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if len(ev.errs) != 1 || ev.errs[0].Code != codes.Unavailable {
				t.Fatalf("reported %v, want only the first stream's failure", ev.errs)
			}
			if m := metricsText(r); strings.Count(m, "zoneproxy_xds_stream_errors_total{") != 1 {
				t.Fatalf("metrics:\n%s", m)
			}
		})
	}
}
