package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// writeRestartDetails lists each run of the restart or hung figure.
func writeRestartDetails(w io.Writer, title, intro string, runs []restartRun) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### %s", title)
	p("")
	p("%s", intro)
	p("")
	p("| run | disruption → gone | exec → /ready 200 | /status then | kuma-cp held the old stream | exec → fault cleared | exec → live | kuma-cp accepted → live | its upsert → live | streams accepted / refused | Envoys launched, same pid | Dataplane gaps |")
	p("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|---|")
	nth := map[string]int{}
	for _, r := range runs {
		nth[r.kind]++
		cleared, upsert := "–", "–"
		if r.kind == kindHung {
			cleared = fmtS(r.cleared.Seconds())
		}
		if !r.upsertAt.IsZero() {
			upsert = fmtMs(ms(r.live - r.upsertAt.Sub(r.exec)))
		}
		var gaps []string
		for _, g := range r.gaps {
			gaps = append(gaps, fmt.Sprintf("%.0f ms from +%.2f s", ms(g.Duration()), g.From.Sub(r.disrupted).Seconds()))
		}
		if len(gaps) == 0 {
			gaps = []string{"none"}
		}
		p("| %s %d | %s | %s | %s | %v | %s | %s | %s | %s | %d / %d | %d, %v | %s |", r.kind, nth[r.kind], fmtS(r.stop.Seconds()), fmtMs(ms(r.serving)),
			r.servingStatus, r.heldAtServing, cleared, fmtS(r.live.Seconds()), fmtMs(ms(r.resume)), upsert, r.accepted, r.refusals,
			r.launches, r.envoySame, strings.Join(gaps, "; "))
	}
	if len(runs) > 0 {
		p("")
		p("/ready's answer when it turned 200 (last run): %q", runs[len(runs)-1].servingBody)
	}
}

func writeEgressStopDetails(w io.Writer, r *egressStopResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	kinds := connKinds(r.conns)
	served := r.servedBy()
	var names []string
	for n := range served {
		names = append(names, n)
	}
	sort.Strings(names)
	var by []string
	for _, n := range names {
		by = append(by, fmt.Sprintf("%s %d", n, served[n]))
	}
	p("")
	p("### A zone egress stopping under sidecar load")
	p("")
	p("Two zone egresses of mesh %s; %d new connections per second, each to the egress kuma-cp hands the sidecars at that moment (round robin), "+
		"a TCP connect and a TLS ClientHello, then read for %s for a reset. %s was SIGTERMed after 2 s of load; the load went on until 2 s after its exit.",
		egressStopMesh, r.rate, resetWatch, r.stopping)
	p("")
	p("- connections: %d; served %d (%s); refused %d, reset %d, other errors %d; ticks with no egress handed out: %d",
		len(r.conns), kinds[outcomeOK], strings.Join(by, ", "), kinds[outcomeRefused], kinds[outcomeReset], kinds[outcomeOther], r.noEgress)
	p("- from the SIGTERM: kuma-cp's store stops handing %s out at +%.2f s, the sidecars at +%.2f s (the store + %s), the last connection sent to it +%.2f s, its exit +%.2f s (exit %d; withdrew first: %v)",
		r.stopping, r.leftStore.Seconds(), r.leftCars.Seconds(), (r.leftCars - r.leftStore).Round(time.Millisecond), r.lastToStop.Seconds(), r.stop.Seconds(), r.code, r.withdrew)
	writeFailedConns(w, r.failed(), r.sig)
}

// connKinds counts the connections by how they ended.
func connKinds(conns []connOutcome) map[string]int {
	kinds := map[string]int{}
	for _, c := range conns {
		kinds[c.kind]++
	}
	return kinds
}

// writeFailedConns lists the first ten failed connections in time order,
// each at its time from since.
func writeFailedConns(w io.Writer, failed []connOutcome, since time.Time) {
	sort.Slice(failed, func(i, j int) bool { return failed[i].at.Before(failed[j].at) })
	for i, c := range failed {
		if i == 10 {
			fmt.Fprintf(w, "- … %d more\n", len(failed)-10)
			break
		}
		fmt.Fprintf(w, "- %s at +%.3f s to %s (:%d): %s\n", c.kind, c.at.Sub(since).Seconds(), c.dataplane, c.port, c.err)
	}
}
