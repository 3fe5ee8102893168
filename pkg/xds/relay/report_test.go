package relay

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// A long outage is one warning a minute; every refusal is said, and the
// agent hears of every failure either way.
func TestUnreachableWarningsAreThrottledRefusalsAreNot(t *testing.T) {
	core, logs := zapobserver.New(zap.WarnLevel)
	var told int
	r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(t).caPEM},
		Token: staticToken("t"), Log: zap.New(core), Events: Events{StreamError: func(StreamError) { told++ }}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		r.report(delta{}, status.Error(codes.Unavailable, "connection refused"), i+1, time.Second)
	}
	for range 2 {
		r.report(delta{}, status.Error(codes.Unauthenticated, "authentication failed: not allowed with this token"), 0, 0)
	}
	if n := logs.FilterMessage("xDS stream to the control plane failed").Len(); n != 1+2 {
		t.Fatalf("%d warnings, want one for the outage and two for the refusals", n)
	}
	if told != 7 {
		t.Fatalf("the agent heard of %d failures, want 7", told)
	}
}

// The agent's view of the cached state (its last CachedConfig event) ends
// where the relay's does, however entering and leaving the cache race.
func TestCachedConfigEventsEndInTheRelaysState(t *testing.T) {
	var mu sync.Mutex
	last := CacheState{}
	r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(t).caPEM}, Token: staticToken("t"),
		Events: Events{CachedConfig: func(c CacheState) { mu.Lock(); last = c; mu.Unlock() }}})
	if err != nil {
		t.Fatal(err)
	}
	s := &lkgcache.Snapshot{WrittenAt: time.Unix(1900000000, 0)}
	for range 2000 {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); r.useCache(s, StreamError{Unreachable: true}) }()
		go func() { defer wg.Done(); r.leaveCache() }()
		wg.Wait()
		mu.Lock()
		agent := last.InUse
		mu.Unlock()
		if relay := r.State().Cache.InUse; agent != relay {
			t.Fatalf("the last event says in use %t, the relay %t", agent, relay)
		}
	}
}
