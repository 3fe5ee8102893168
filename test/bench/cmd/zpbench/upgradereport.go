package main

import (
	"fmt"
	"io"
	"time"
)

// Targets of the upgrade figure.
const (
	// A reload swaps the agent's program only: Envoy and its listeners stay,
	// so the new program is serving as soon as it took Envoy over.
	targetReloadServing = time.Second
	// A handover is a new Envoy's start to LIVE beside the old one, then the
	// move of kuma-cp's stream. /ready stays 200 throughout, so no client
	// waits on it; the bound catches a handover that waits on a timer or
	// retries, and leaves a real Envoy's start (about a second) room.
	targetHandover = 5 * time.Second
)

func (m *measured) upgradeRows(s settings) []row {
	fReloadConns := fmt.Sprintf("zone egress under %d new sidecar connections/s: connections refused or reset during %d reloads in a row", s.egressRate, s.upgradeReloads)
	fHandoverConns := fmt.Sprintf("… during %d Envoy handovers in a row", s.upgradeHandovers)
	const (
		fReload   = "reload → new agent serving: `zoneproxy reload` started → /status shows the next generation and /ready 200"
		fHandover = "Envoy handover duration: POST /envoy/handover → 200 (the new Envoy serves)"
		fPID      = "Envoy PID unchanged across the reloads"
	)
	tReload := fmt.Sprintf("≤ %.0f s median", targetReloadServing.Seconds())
	tHandover := fmt.Sprintf("≤ %.0f s median", targetHandover.Seconds())
	const tPID = "the same pid after every reload, no Envoy launched"
	r := m.upgrade
	if err := m.errs["upgrade"]; r == nil || err != nil {
		return []row{notRun(fReloadConns, "0", err), notRun(fHandoverConns, "0", err), notRun(fReload, tReload, err),
			notRun(fHandover, tHandover, err), notRun(fPID, tPID, err)}
	}
	serving := durs(r.reloads, func(rl reloadRun) time.Duration { return rl.serving })
	command := durs(r.reloads, func(rl reloadRun) time.Duration { return rl.command })
	took := durs(r.handovers, func(h handoverRun) time.Duration { return h.took })
	oldExit := durs(r.handovers, func(h handoverRun) time.Duration { return h.oldExit })
	refused, waited := 0, time.Duration(0)
	for _, h := range r.handovers {
		refused, waited = refused+h.refused, waited+h.waited
	}
	migrate := "0: the kernel resets clients queued on the old Envoy's listeners"
	if r.migrates {
		migrate = "1"
	}
	pid := "changed"
	if r.envoyKept() {
		pid = "unchanged"
	}
	return []row{
		countRow(fReloadConns, len(r.reloads), len(failedConns(r.reloadLoad.conns)), r.reloadLoad.note(r.reloadsFrom)),
		countRow(fHandoverConns, len(r.handovers), len(failedConns(r.handoverLoad.conns)),
			r.handoverLoad.note(r.reloadsFrom)+"; net.ipv4.tcp_migrate_req "+migrate),
		secRow(fReload, tReload, serving, serving.Median <= targetReloadServing.Seconds(),
			fmt.Sprintf("the command itself exits after %.2f s median (it polls /status every 50 ms); the new program serves Envoy its cache while kuma-cp holds the previous program's stream", command.Median)),
		secRow(fHandover, tHandover, took, took.Median <= targetHandover.Seconds(),
			fmt.Sprintf("the old Envoy gone %.2f s median (%.2f s max) after the 200, `--drain-time 1s --drain-min 0s`; not counted: %d refusals (409) over %.1f s until kuma-cp let go of the reloaded agent's stream", oldExit.Median, oldExit.Max, refused, waited.Seconds())),
		{Figure: fPID, Runs: len(r.reloads), Median: pid, Min: "–", Max: "–", Target: tPID, Result: verdict(r.envoyKept()),
			Note: fmt.Sprintf("pid %d; the wrapper saw %d Envoy launched by the last reload", r.envoyPID, r.envoyLaunches)},
	}
}

// note says how many connections the window had and how they ended, and
// when kuma-cp handed out no egress, from since.
func (w loadWindow) note(since time.Time) string {
	k := connKinds(w.conns)
	s := fmt.Sprintf("%d connections in %.1f s: refused %d, reset %d, other errors %d; ticks with no egress handed out %d",
		len(w.conns), w.to.Sub(w.from).Seconds(), k[outcomeRefused], k[outcomeReset], k[outcomeOther], len(w.noEgress))
	if n := len(w.noEgress); n > 0 {
		s += fmt.Sprintf(" (+%.2f to +%.2f s after the first reload)", w.noEgress[0].Sub(since).Seconds(), w.noEgress[n-1].Sub(since).Seconds())
	}
	return s
}

func writeUpgradeDetails(w io.Writer, r *upgradeResult, s settings) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### Reloads and Envoy handovers under sidecar load")
	p("")
	p("One zone egress of mesh %s (`--drain-time 1s --drain-min 0s`), warm; %d new connections per second to the egress kuma-cp hands out, "+
		"each a TCP connect and a TLS ClientHello, then read for %s for a reset, from 2 s before the first reload to 1 s after the last old Envoy's exit. "+
		"%d `zoneproxy reload` in a row, each once the previous generation served; then %d `POST /envoy/handover` in a row, each once the previous old Envoy exited, "+
		"asked again with backoff (100 ms doubling to 1 s) while refused.",
		upgradeMesh, r.rate, resetWatch, s.upgradeReloads, s.upgradeHandovers)
	p("")
	p("| # | reload → serving | the reload command | handover refused before | for | POST → 200 | old Envoy gone after |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for i := 0; i < max(len(r.reloads), len(r.handovers)); i++ {
		rl, h := "– | –", "– | – | – | –"
		if i < len(r.reloads) {
			rl = fmtMs(ms(r.reloads[i].serving)) + " | " + fmtMs(ms(r.reloads[i].command))
		}
		if i < len(r.handovers) {
			x := r.handovers[i]
			h = fmt.Sprintf("%d | %s | %s | %s", x.refused, fmtS(x.waited.Seconds()), fmtMs(ms(x.took)), fmtMs(ms(x.oldExit)))
		}
		p("| %d | %s | %s |", i+1, rl, h)
	}
	for _, ph := range []struct {
		name string
		w    loadWindow
	}{{"reloads", r.reloadLoad}, {"handovers", r.handoverLoad}} {
		p("")
		p("- during the %s: %s", ph.name, ph.w.note(r.reloadsFrom))
		writeFailedConns(w, failedConns(ph.w.conns), r.reloadsFrom)
	}
	if len(r.reloads) > 0 {
		p("")
		p("/ready's answer once the last reload served: %q", r.reloads[len(r.reloads)-1].readyBody)
	}
}
