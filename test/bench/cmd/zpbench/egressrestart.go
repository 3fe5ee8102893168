package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The egress-restart figure: a lone zone egress restarted under sidecar
// load, and the seconds its sidecars had no working egress (none handed
// out, or the one handed out refused or reset the connection), against
// the test control plane with kuma-cp's default timings. A restart is
// SIGUSR1, what systemd's restart job amounts to (the agent asks systemd
// over D-Bus; here no systemd runs); one stop and start (SIGTERM: the
// egress withdraws first) is measured beside it, as every restart was
// before.

// egressRestartMesh is the figure's own mesh, for egress-stop's reason.
const egressRestartMesh = "bench-egress-restart"

// targetEgressRestart is the most a restart may leave the sidecars
// without a working egress, every run.
const targetEgressRestart = time.Second

// cmpEgressRestart: issue 36, against a real kuma-cp with one egress and
// one sidecar, restarted as `systemctl restart` does it.
const cmpEgressRestart = "kuma-dp ~14.8 s, zoneproxy before ~14.9 s against kuma-cp"

// logRestart is what a restarting egress logs.
const logRestart = "restart: the egress stays in kuma-cp's egress set"

// span is a time the sidecars had no working egress, and why it began.
type span struct {
	from, to time.Time
	why      string
}

// egressRestartRun is one restart (or stop and start) of the lone egress.
type egressRestartRun struct {
	sig      syscall.Signal
	sent     time.Time
	stop     time.Duration // signal → exit
	logged   bool          // the agent said which it was (logRestart, or it withdrew)
	accepted int           // streams of the node kuma-cp accepted from the signal to the end
	conns    int
	outages  []span
}

// signalName is how the report names a run's signal.
func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGUSR1 {
		return "SIGUSR1 (restart)"
	}
	return "SIGTERM (stop)"
}

func (r egressRestartRun) down() time.Duration {
	var d time.Duration
	for _, s := range r.outages {
		d += s.to.Sub(s.from)
	}
	return d
}

type egressRestartResult struct {
	rate     int
	restarts []egressRestartRun
	stop     *egressRestartRun
}

// egressRestartFigure restarts a lone warm egress b.s.restartRuns times
// (SIGUSR1), then stops and starts it once (SIGTERM).
func (b *bed) egressRestartFigure() (egressRestartResult, error) {
	res := egressRestartResult{rate: b.s.egressRate}
	b.cp.CreateMesh(egressRestartMesh)
	p, err := b.newEgress(egressRestartMesh, "bench-egress-lone")
	if err != nil {
		return res, err
	}
	cur, err := b.start(b.zoneproxy, p)
	if err != nil {
		return res, err
	}
	defer func() { cur.kill() }()
	// A first start holds the egress back until Envoy has its listener,
	// then registers it Ready: once kuma-cp's deregistration delay is over.
	if !waitUntil(40*time.Second, 10*time.Millisecond, func() bool {
		return b.cp.NodeStream(nodeID(p)).Connected && handsOut(b.cp.StoredZoneEgresses(egressRestartMesh), p.name)
	}) {
		return res, fmt.Errorf("kuma-cp does not hand the egress out 40 s after its start:\n%s", cur.tail(15))
	}
	for i := 0; i <= b.s.restartRuns; i++ {
		sig := syscall.SIGUSR1
		if i == b.s.restartRuns {
			sig = syscall.SIGTERM
		}
		na, r, err := b.egressRestartOnce(cur, p, sig, i)
		if na != nil {
			cur = na
		}
		if err != nil {
			return res, fmt.Errorf("%s run %d: %w", sig, i+1, err)
		}
		progress("  %s %d: signal → exit %.2f s; no working egress for %.3f s (%d spans); said which: %v", signalName(sig), i+1, r.stop.Seconds(), r.down().Seconds(), len(r.outages), r.logged)
		if sig == syscall.SIGTERM {
			res.stop = &r
		} else {
			res.restarts = append(res.restarts, r)
		}
	}
	return res, nil
}

// egressRestartOnce puts the sidecar load on, signals a, starts p again
// at once and follows the sidecars until the egress set they get has
// settled with the new registration, plus a second.
func (b *bed) egressRestartOnce(a *agent, p proxy, sig syscall.Signal, n int) (*agent, egressRestartRun, error) {
	r := egressRestartRun{sig: sig}
	load, err := b.sidecarsOn(egressRestartMesh, 1, b.s.egressRate)
	if err != nil {
		return nil, r, err
	}
	defer load.finish()
	node := nodeID(p)
	before := b.cp.NodeStream(node)
	r.sent = time.Now()
	a.signal(sig)
	code, err := a.wait(60 * time.Second)
	if err != nil {
		return nil, r, err
	}
	r.stop = a.exitedAt.Sub(r.sent)
	out := strings.Join(a.output(), "\n")
	r.logged = strings.Contains(out, logRestart)
	if sig == syscall.SIGTERM {
		r.logged = strings.Contains(out, logWithdrawn)
	}
	if code != 0 {
		return nil, r, fmt.Errorf("exit %d:\n%s", code, a.tail(15))
	}
	q := withStamp(p, fmt.Sprintf("egress-restart%d", n))
	na, err := b.start(b.zoneproxy, q)
	if err != nil {
		return nil, r, err
	}
	if _, err := awaitLive(na, q.readiness, 40*time.Second); err != nil {
		return na, r, err
	}
	if !waitUntil(20*time.Second, 10*time.Millisecond, func() bool {
		tl := b.cp.ZoneEgressTimeline(egressRestartMesh)
		last := tl[len(tl)-1]
		return b.cp.NodeStream(node).Connected && handsOut(last.Egresses, p.name) && time.Now().After(last.EffectiveAt.Add(time.Second))
	}) {
		return na, r, fmt.Errorf("the sidecars do not get the egress back 20 s after it is live again")
	}
	r.accepted = b.cp.NodeStream(node).Accepted - before.Accepted
	conns, none := load.finish()
	r.conns = len(conns)
	r.outages = outagesOf(conns, none, time.Now())
	return na, r, nil
}

// outagesOf turns the load's outcomes into the spans with no working
// egress: from a connection that failed, or a tick with none handed out,
// to the next connection that worked (or end).
func outagesOf(conns []connOutcome, none []time.Time, end time.Time) []span {
	type ev struct {
		at  time.Time
		why string // "" for a connection that worked
	}
	var evs []ev
	for _, c := range conns {
		why := ""
		if c.kind != outcomeOK {
			why = c.kind + ": " + c.err
		}
		evs = append(evs, ev{c.at, why})
	}
	for _, t := range none {
		evs = append(evs, ev{t, "no egress handed out"})
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	var out []span
	var cur *span
	for _, e := range evs {
		switch {
		case e.why != "" && cur == nil:
			cur = &span{from: e.at, why: e.why}
		case e.why == "" && cur != nil:
			cur.to = e.at
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		cur.to = end
		out = append(out, *cur)
	}
	return out
}

func (m *measured) egressRestartRow() row {
	const f = "lone zone egress restarted (SIGUSR1, as systemd's restart job) under sidecar load: seconds the sidecars had no working egress"
	t := fmt.Sprintf("≤ %.0f s every run", targetEgressRestart.Seconds())
	r := m.egressRestart
	if r == nil || m.errs["egress-restart"] != nil || len(r.restarts) == 0 {
		return notRun(f, t, m.errs["egress-restart"])
	}
	x := durs(r.restarts, egressRestartRun.down)
	ok := x.Max <= targetEgressRestart.Seconds()
	for _, run := range r.restarts {
		ok = ok && run.logged && run.accepted == 1
	}
	note := cmpEgressRestart
	if r.stop != nil {
		note += fmt.Sprintf("; the same egress stopped and started (SIGTERM: it withdraws first, as every restart did before) %.2f s here", r.stop.down().Seconds())
	}
	return secRow(f, t, x, ok, note)
}

func writeEgressRestartDetails(w io.Writer, r *egressRestartResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### A lone zone egress restarting under sidecar load")
	p("")
	p("One zone egress of mesh %s with a warm cache, kuma-cp's default timings (10 s deregistration delay, 1 s cache expiration, 3 s until the sidecars see a change of the egress set); "+
		"%d new connections per second, each to the egress kuma-cp hands the sidecars at that moment, a TCP connect and a TLS ClientHello, then read for %s for a reset. "+
		"Each run signals the agent, starts it again at once with the same dirs as soon as it exited, and ends 1 s after the sidecars got the new registration. "+
		"A span without a working egress runs from a connection that failed (or a tick with no egress handed out) to the next that worked.",
		egressRestartMesh, r.rate, resetWatch)
	p("")
	runs := append([]egressRestartRun(nil), r.restarts...)
	if r.stop != nil {
		runs = append(runs, *r.stop)
	}
	for i, run := range runs {
		var spans []string
		for _, s := range run.outages {
			spans = append(spans, fmt.Sprintf("%.3f s from +%.3f s (%s)", s.to.Sub(s.from).Seconds(), s.from.Sub(run.sent).Seconds(), s.why))
		}
		p("- run %d, %s: signal → exit %.2f s; %d connections; without a working egress %.3f s: %s; streams kuma-cp accepted %d; logged which it was: %v",
			i+1, signalName(run.sig), run.stop.Seconds(), run.conns, run.down().Seconds(), strings.Join(spans, "; "), run.accepted, run.logged)
	}
}
