package main

import (
	"fmt"
	"syscall"
	"time"
)

// holdbackMesh is the egress-holdback figure's own mesh, so no other
// figure's egress is in its egress set.
const holdbackMesh = "bench-holdback"

// holdbackRuns is how many fresh egresses the figure starts.
const holdbackRuns = 3

// targetCachedEgressReady: a start whose cache holds the egress listener
// registers it Ready at once (the 1 s for a restart).
const targetCachedEgressReady = time.Second

// holdbackStart is one start of a zone egress: exec → /ready 200, and
// exec → kuma-cp's store hands it out in the egress set (the sidecars
// hear of it the propagation lag later).
type holdbackStart struct {
	ready, inSet, atSidecars time.Duration
}

// holdbackRun is a first start with an empty cache (registered NotReady
// until Envoy has the egress listener, then Ready on a new stream, which
// kuma-cp accepts after its deregistration delay) and, once kuma-cp let
// go of that Dataplane, a start with the listener in the cache.
type holdbackRun struct {
	first, cached holdbackStart
}

type holdbackResult struct{ runs []holdbackRun }

// holdbackFigure measures the hold-back's switch under kuma-cp's default
// timings (10 s deregistration delay, 1 s cache expiration, 3 s
// propagation: the bench's control plane).
func (b *bed) holdbackFigure() (holdbackResult, error) {
	var res holdbackResult
	b.cp.CreateMesh(holdbackMesh)
	for i := 0; i < holdbackRuns; i++ {
		p, err := b.newEgress(holdbackMesh, fmt.Sprintf("bench-holdback-%d", i))
		if err != nil {
			return res, err
		}
		var run holdbackRun
		if run.first, err = b.holdbackStart(p); err != nil {
			return res, fmt.Errorf("first start: %w", err)
		}
		if !waitUntil(30*time.Second, 20*time.Millisecond, func() bool { _, ok := b.cp.Dataplane(p.mesh, p.name); return !ok }) {
			return res, fmt.Errorf("%s: kuma-cp kept the Dataplane 30 s after the stop", p.name)
		}
		if run.cached, err = b.holdbackStart(p); err != nil {
			return res, fmt.Errorf("start from the cache: %w", err)
		}
		res.runs = append(res.runs, run)
	}
	return res, nil
}

// holdbackStart starts p, times it, and stops it (SIGTERM).
func (b *bed) holdbackStart(p proxy) (holdbackStart, error) {
	var st holdbackStart
	a, err := b.start(b.zoneproxy, p)
	if err != nil {
		return st, err
	}
	defer a.kill()
	readyAt, _, err := awaitServing(a, p.readiness, 30*time.Second)
	if err != nil {
		return st, err
	}
	st.ready = readyAt.Sub(a.execAt)
	ok := waitUntil(30*time.Second, 20*time.Millisecond, func() bool {
		for _, ch := range b.cp.ZoneEgressTimeline(p.mesh) {
			if !ch.At.Before(a.execAt) && handsOut(ch.Egresses, p.name) {
				st.inSet, st.atSidecars = ch.At.Sub(a.execAt), ch.EffectiveAt.Sub(a.execAt)
				return true
			}
		}
		return false
	})
	if !ok {
		return st, fmt.Errorf("%s: not in kuma-cp's egress set 30 s after exec:\n%s", p.name, a.tail(15))
	}
	a.signal(syscall.SIGTERM)
	if code, err := a.wait(30 * time.Second); err != nil || code != 0 {
		return st, fmt.Errorf("%s: exit %d on SIGTERM (%v):\n%s", p.name, code, err, a.tail(15))
	}
	return st, nil
}

func (m *measured) holdbackRows() []row {
	const (
		fReady  = "zone egress first start, empty cache, kuma-cp's default timings: exec → /ready 200"
		fInSet  = "… exec → kuma-cp hands it out Ready (its store; the sidecars: the 3 s propagation later)"
		fCached = "zone egress start with the egress listener in its cache: exec → kuma-cp hands it out Ready"
	)
	r := m.holdback
	if r == nil || m.errs["egress-holdback"] != nil || len(r.runs) == 0 {
		err := m.errs["egress-holdback"]
		return []row{notRun(fReady, "none (reported)", err), notRun(fCached, fmt.Sprintf("≤ %.0f s every run", targetCachedEgressReady.Seconds()), err)}
	}
	first := func(f func(holdbackStart) time.Duration) summary {
		return durs(r.runs, func(x holdbackRun) time.Duration { return f(x.first) })
	}
	cached := durs(r.runs, func(x holdbackRun) time.Duration { return x.cached.inSet })
	return []row{
		secRow(fReady, "", first(func(s holdbackStart) time.Duration { return s.ready }), true, "registered NotReady until Envoy has the egress listener"),
		secRow(fInSet, "", first(func(s holdbackStart) time.Duration { return s.inSet }), true,
			fmt.Sprintf("at the sidecars %.2f s median: the Ready registration waits out kuma-cp's 10 s deregistration delay", first(func(s holdbackStart) time.Duration { return s.atSidecars }).Median)),
		secRow(fCached, fmt.Sprintf("≤ %.0f s every run", targetCachedEgressReady.Seconds()), cached, cached.Max <= targetCachedEgressReady.Seconds(),
			fmt.Sprintf("exec → /ready 200 %.2f s median; registered Ready at once", durs(r.runs, func(x holdbackRun) time.Duration { return x.cached.ready }).Median)),
	}
}
