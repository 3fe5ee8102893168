package main

import (
	"fmt"
	"time"
)

// Targets of the restart, hung and egress-stop figures.
const (
	targetRestartServing = time.Second     // exec → /ready 200 after a planned or SIGKILL restart, median
	targetDataplaneGap   = time.Second     // longest time without a Dataplane in kuma-cp's store, every run
	targetResumeLive     = 2 * time.Second // kuma-cp accepted the new stream → live, every run
	targetHungServing    = 5 * time.Second // exec → /ready 200 with a hung control plane, every run
)

// What kuma-dp and zoneproxy before the resume (84db2e2) did against a
// real kuma-cp with its default timings: kuma-live.md §9.
const (
	cmpPlanned    = "kuma-dp 18.1 s, old zoneproxy 12.9 s"
	cmpKill       = "old zoneproxy 13.3 s (/ready 503 until then)"
	cmpGapPlanned = "kuma-dp ~5.8 s, old zoneproxy ~1.5 s"
	cmpGapKill    = "old zoneproxy 2.1 s (+10.1 s to +12.2 s)"
	cmpHung       = "old zoneproxy 13.3 s (10 s bootstrap timeout + 3 s TLS timeout)"
	cmpHungLive   = "old zoneproxy 29 s from the resume to live"
	cmpEgressStop = "kuma-dp 1,513 refused under 100 conn/s"
)

// durs summarizes get over runs, in seconds.
func durs[T any](runs []T, get func(T) time.Duration) summary {
	var xs []float64
	for _, r := range runs {
		xs = append(xs, get(r).Seconds())
	}
	return summarize(xs)
}

// secRow is a row of durations in seconds.
func secRow(figure, target string, x summary, ok bool, note string) row {
	res := verdict(ok)
	if target == "" {
		target, res = "none (reported)", "reported"
	}
	return row{Figure: figure, Runs: x.N, Median: fmtS(x.Median), Min: fmtS(x.Min), Max: fmtS(x.Max), Target: target, Result: res, Note: note}
}

// countRow is a row of one count whose target is 0.
func countRow(figure string, runs, n int, note string) row {
	v := fmt.Sprint(n)
	return row{Figure: figure, Runs: runs, Median: v, Min: v, Max: v, Target: "0", Result: verdict(n == 0), Note: note}
}

func countIf(runs []restartRun, f func(restartRun) bool) int {
	n := 0
	for _, r := range runs {
		if f(r) {
			n++
		}
	}
	return n
}

func serving(r restartRun) time.Duration { return r.serving }
func resume(r restartRun) time.Duration  { return r.resume }
func gap(r restartRun) time.Duration     { return r.longestGap() }

func (m *measured) restartRows(s settings) []row {
	const (
		fPlanned = "zone egress, planned restart (SIGTERM, exit, start at once), kuma-cp's default timings: exec → /ready 200"
		fStop    = "… its stop: SIGTERM → exit (the egress withdraws from kuma-cp's egress set first)"
		fKill    = "zone egress agent SIGKILLed (Envoy with it), started at once: exec → /ready 200"
		fGapP    = "Dataplane absent from kuma-cp's store, SIGTERM → live again: longest gap"
		fGapK    = "Dataplane absent from kuma-cp's store, SIGKILL → live again: longest gap"
		fResume  = "resume → live after those restarts: kuma-cp accepts the new stream → /ready without \"cached\""
	)
	tServing := fmt.Sprintf("≤ %.0f s median", targetRestartServing.Seconds())
	tGap := fmt.Sprintf("≤ %.0f s every run", targetDataplaneGap.Seconds())
	tResume := fmt.Sprintf("≤ %.0f s every run, one stream accepted, Envoy not restarted", targetResumeLive.Seconds())
	r := m.restart
	if r == nil || m.errs["restart"] != nil || len(r.planned) == 0 || len(r.killed) == 0 {
		err := m.errs["restart"]
		return []row{notRun(fPlanned, tServing, err), notRun(fStop, "none", nil), notRun(fKill, tServing, err),
			notRun(fGapP, tGap, err), notRun(fGapK, tGap, err), notRun(fResume, tResume, err)}
	}
	held := func(r restartRun) bool { return r.heldAtServing && isCached(r.servingBody) }
	sp, sk := durs(r.planned, serving), durs(r.killed, serving)
	gp, gk := durs(r.planned, gap), durs(r.killed, gap)
	both := append(append([]restartRun(nil), r.planned...), r.killed...)
	rs := durs(both, resume)
	good := countIf(both, restartRun.resumeOK)
	return []row{
		secRow(fPlanned, tServing, sp, sp.Median <= targetRestartServing.Seconds(),
			fmt.Sprintf("%s; served the cache while kuma-cp held the old stream in %d of %d", cmpPlanned, countIf(r.planned, held), len(r.planned))),
		secRow(fStop, "", durs(r.planned, func(r restartRun) time.Duration { return r.stop }), true,
			fmt.Sprintf("withdrew first in %d of %d; kuma-cp's 10 s delay + 1 s + 3 s for the sidecars + the drain", countIf(r.planned, func(r restartRun) bool { return r.withdrew }), len(r.planned))),
		secRow(fKill, tServing, sk, sk.Median <= targetRestartServing.Seconds(),
			fmt.Sprintf("%s; served the cache while kuma-cp held the old stream in %d of %d", cmpKill, countIf(r.killed, held), len(r.killed))),
		secRow(fGapP, tGap, gp, gp.Max <= targetDataplaneGap.Seconds(), cmpGapPlanned+"; the withdrawal's and the restart's gaps"),
		secRow(fGapK, tGap, gk, gk.Max <= targetDataplaneGap.Seconds(), cmpGapKill),
		secRow(fResume, tResume, rs, rs.Max <= targetResumeLive.Seconds() && good == len(both),
			fmt.Sprintf("one stream accepted and Envoy's pid unchanged in %d of %d; exec → live median %.2f s", good, len(both),
				durs(both, func(r restartRun) time.Duration { return r.live }).Median)),
	}
}

func (m *measured) hungRows() []row {
	const (
		fHung = "control plane hung (accepts TCP, answers nothing), warm cache, agent SIGKILLed and started: exec → /ready 200"
		fLive = "… fault cleared: kuma-cp accepts the new stream → /ready without \"cached\""
	)
	tHung := fmt.Sprintf("≤ %.0f s every run", targetHungServing.Seconds())
	tResume := fmt.Sprintf("≤ %.0f s every run, one stream accepted, Envoy not restarted", targetResumeLive.Seconds())
	runs := m.hung
	if m.errs["hung"] != nil || len(runs) == 0 {
		return []row{notRun(fHung, tHung, m.errs["hung"]), notRun(fLive, tResume, m.errs["hung"])}
	}
	sh, rs := durs(runs, serving), durs(runs, resume)
	good := countIf(runs, restartRun.resumeOK)
	toLive := durs(runs, func(r restartRun) time.Duration { return r.live - r.cleared })
	return []row{
		secRow(fHung, tHung, sh, sh.Max <= targetHungServing.Seconds(), cmpHung),
		secRow(fLive, tResume, rs, rs.Max <= targetResumeLive.Seconds() && good == len(runs),
			fmt.Sprintf("fault cleared → live median %.2f s (%s); one stream accepted and Envoy's pid unchanged in %d of %d", toLive.Median, cmpHungLive, good, len(runs))),
	}
}

func (m *measured) egressStopRow() row {
	const f = "zone egress stopped (SIGTERM) while sidecars open new connections to the egresses kuma-cp hands out: connections refused or reset"
	r := m.egressStop
	if r == nil || m.errs["egress-stop"] != nil {
		return notRun(f, "0", m.errs["egress-stop"])
	}
	n := len(r.failed())
	note := fmt.Sprintf("%d connections at %d/s (%s); SIGTERM → exit %.2f s, out of the set the sidecars get at +%.2f s, last connection sent to it at +%.2f s",
		len(r.conns), r.rate, cmpEgressStop, r.stop.Seconds(), r.leftCars.Seconds(), r.lastToStop.Seconds())
	rw := countRow(f, 1, n, note)
	rw.Result = verdict(n == 0 && r.withdrew)
	return rw
}
