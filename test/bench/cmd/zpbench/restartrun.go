package main

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// One disruption of a warm zone egress and its start again, against the
// control plane with kuma-cp's default timings (10 s deregistration
// delay, 1 s cache expiration).

// Kinds of disruption.
const (
	kindPlanned = "planned" // SIGTERM, wait for the exit (the egress withdraws first), start again
	kindKill    = "SIGKILL" // kill -9 the agent (Envoy dies with it), start again
	kindHung    = "hung"    // the control plane hangs, then SIGKILL and start again; the fault is cleared once /ready is 200
)

// logWithdrawn is what a stopping egress logs once kuma-cp took it out of
// its egress set.
const logWithdrawn = "kuma-cp took the zone egress out of its egress set"

// restartRun is what one disruption and start again measured.
type restartRun struct {
	kind          string
	stop          time.Duration // signal → the agent exited (SIGKILL: and its Envoy is gone)
	stopCode      int
	withdrew      bool          // planned: the agent logged logWithdrawn before its exit
	serving       time.Duration // exec → /ready 200
	servingBody   string
	servingStatus string        // /status phase/controlPlane.state then
	heldAtServing bool          // kuma-cp still held the previous run's stream then
	cleared       time.Duration // hung: exec → the fault cleared
	live          time.Duration // exec → /ready 200 without "cached"
	acceptedAt    time.Time     // kuma-cp accepted the stream Envoy carried on with
	resume        time.Duration // acceptedAt → live
	upsertAt      time.Time     // the Dataplane's upsert from that stream (zero if none seen)
	accepted      int           // streams of this node kuma-cp accepted between exec and live
	refusals      int           // and refused
	launches      int           // Envoys the new agent launched by then
	envoySame     bool          // the Envoy on live configuration is the one that served the cache
	gaps          []controlplane.Gap
	disrupted     time.Time
	exec          time.Time
}

// longestGap is the longest time kuma-cp's store had no Dataplane for the
// proxy, from the disruption to live configuration.
func (r restartRun) longestGap() time.Duration {
	var d time.Duration
	for _, g := range r.gaps {
		d = max(d, g.Duration())
	}
	return d
}

// resumeOK: one stream accepted for the resume and Envoy not restarted.
func (r restartRun) resumeOK() bool { return r.accepted == 1 && r.envoySame && r.launches == 1 }

// disrupt stops a as kind says and waits until it (and for SIGKILL its
// Envoy) is gone.
func (b *bed) disrupt(a *agent, kind string, r *restartRun) error {
	envoys := envoyLaunches(a.stamp)
	if kind == kindHung {
		b.cp.SetFaults(controlplane.Faults{Hang: true})
	}
	r.disrupted = time.Now()
	if kind == kindPlanned {
		a.signal(syscall.SIGTERM)
	} else {
		a.signal(syscall.SIGKILL)
	}
	code, err := a.wait(40 * time.Second)
	if err != nil {
		return err
	}
	r.stopCode = code
	for _, pid := range envoys {
		if !waitUntil(5*time.Second, time.Millisecond, func() bool { return harness.ProcessGone(pid) }) {
			return fmt.Errorf("Envoy (pid %d) still runs 5 s after its agent exited", pid)
		}
	}
	r.stop = time.Since(r.disrupted)
	if kind == kindPlanned {
		r.stop = a.exitedAt.Sub(r.disrupted)
		r.withdrew = strings.Contains(strings.Join(a.output(), "\n"), logWithdrawn)
		if code != 0 {
			return fmt.Errorf("SIGTERM: exit %d:\n%s", code, a.tail(15))
		}
	}
	return nil
}

// restartOnce disrupts a, starts p again and follows it to live
// configuration. It returns the new agent (nil if none started).
func (b *bed) restartOnce(a *agent, p proxy, kind string, n int) (*agent, restartRun, error) {
	r := restartRun{kind: kind}
	node := nodeID(p)
	if err := b.disrupt(a, kind, &r); err != nil {
		return nil, r, err
	}
	before := b.cp.NodeStream(node)
	q := withStamp(p, fmt.Sprintf("%s%d", strings.ToLower(kind), n))
	na, err := b.start(b.zoneproxy, q)
	if err != nil {
		return nil, r, err
	}
	r.exec = na.execAt
	servingAt, body, err := awaitServing(na, q.readiness, 15*time.Second)
	if err != nil {
		return na, r, err
	}
	r.serving, r.servingBody = servingAt.Sub(na.execAt), body
	r.heldAtServing = b.cp.NodeStream(node).DeregisteringSince != nil
	r.servingStatus = statusOf(q.readiness)
	first := envoyLaunches(q.stamp)
	if kind == kindHung {
		b.cp.SetFaults(controlplane.Faults{})
		r.cleared = time.Since(na.execAt)
	}
	liveAt, err := awaitLive(na, q.readiness, 40*time.Second)
	if err != nil {
		return na, r, err
	}
	r.live = liveAt.Sub(na.execAt)
	ns := b.cp.NodeStream(node)
	r.accepted, r.refusals = ns.Accepted-before.Accepted, ns.Refusals-before.Refusals
	if ns.ActiveSince != nil {
		r.acceptedAt = *ns.ActiveSince
		r.resume = liveAt.Sub(r.acceptedAt)
	}
	events := b.cp.DataplaneTimeline(p.mesh, p.name)
	for _, e := range events {
		if e.Kind == controlplane.DataplaneUpserted && e.At.After(na.execAt) && !e.At.After(liveAt) {
			r.upsertAt = e.At
		}
	}
	r.gaps = controlplane.DataplaneGaps(events, r.disrupted, liveAt)
	now := envoyLaunches(q.stamp)
	r.launches = len(now)
	r.envoySame = len(first) == 1 && len(now) == 1 && first[0] == now[0] && !harness.ProcessGone(now[0])
	return na, r, nil
}

// restartSeries makes n disruptions of kind in a row, each of the agent
// the previous one started; cur is updated so the caller can end it.
func (b *bed) restartSeries(cur **agent, p proxy, kind string, n int) ([]restartRun, error) {
	var runs []restartRun
	for i := 0; i < n; i++ {
		na, r, err := b.restartOnce(*cur, p, kind, i)
		if na != nil {
			*cur = na
		}
		if err != nil {
			return runs, fmt.Errorf("%s run %d: %w", kind, i+1, err)
		}
		runs = append(runs, r)
		progress("  %s %d: stop %.2f s; exec → /ready 200 %.0f ms (%s); → live %.2f s; accepted → live %.0f ms; %d accepted, Envoy kept %v; longest Dataplane gap %.0f ms",
			kind, i+1, r.stop.Seconds(), ms(r.serving), r.servingStatus, r.live.Seconds(), ms(r.resume), r.accepted, r.envoySame, ms(r.longestGap()))
	}
	return runs, nil
}
