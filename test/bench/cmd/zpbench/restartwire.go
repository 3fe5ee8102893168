package main

import "io"

// The restart, hung, egress-stop and upgrade figures in the run, the
// table and the details.

func (b *bed) measureRestarts(m *measured) {
	if b.s.figures["restart"] {
		progress("zone egress restarts, kuma-cp's default timings: %d planned (SIGTERM) and %d SIGKILL, each followed to live configuration", b.s.restartRuns, b.s.restartRuns)
		res, err := b.restartFigure()
		m.restart, m.errs["restart"] = &res, err
	}
	if b.s.figures["hung"] {
		progress("hung control plane, warm cache: %d SIGKILL restarts, the fault cleared once /ready is 200", b.s.hungRuns)
		m.hung, m.errs["hung"] = b.hungFigure()
	}
	if b.s.figures["egress-stop"] {
		progress("a zone egress stops under %d sidecar connections per second", b.s.egressRate)
		res, err := b.egressStopFigure()
		m.egressStop, m.errs["egress-stop"] = &res, err
	}
	if b.s.figures["egress-restart"] {
		progress("a lone zone egress restarted %d times (SIGUSR1) and stopped once (SIGTERM) under %d sidecar connections per second", b.s.restartRuns, b.s.egressRate)
		res, err := b.egressRestartFigure()
		m.egressRestart, m.errs["egress-restart"] = &res, err
	}
	if b.s.figures["egress-holdback"] {
		progress("zone egress hold-back, kuma-cp's default timings: %d first starts with an empty cache, each then started from its cache", holdbackRuns)
		res, err := b.holdbackFigure()
		m.holdback, m.errs["egress-holdback"] = &res, err
	}
	if b.s.figures["upgrade"] {
		progress("a zone egress under %d sidecar connections per second: %d reloads in a row, then %d Envoy handovers in a row", b.s.egressRate, b.s.upgradeReloads, b.s.upgradeHandovers)
		res, err := b.upgradeFigure()
		m.upgrade, m.errs["upgrade"] = &res, err
	}
	if b.s.figures["kuma-upgrade"] {
		progress("a zone egress under %d sidecar connections per second while kuma-cp goes 2.14 → 3.0 → 2.14 → 3.0", b.s.egressRate)
		res, err := b.kumaUpgradeFigure()
		m.kumaUpgrade, m.errs["kuma-upgrade"] = &res, err
	}
}

func (m *measured) restartFigureRows(s settings) []row {
	var rows []row
	if s.figures["restart"] {
		rows = append(rows, m.restartRows(s)...)
	}
	if s.figures["hung"] {
		rows = append(rows, m.hungRows()...)
	}
	if s.figures["egress-stop"] {
		rows = append(rows, m.egressStopRow())
	}
	if s.figures["egress-restart"] {
		rows = append(rows, m.egressRestartRow())
	}
	if s.figures["egress-holdback"] {
		rows = append(rows, m.holdbackRows()...)
	}
	if s.figures["upgrade"] {
		rows = append(rows, m.upgradeRows(s)...)
	}
	if s.figures["kuma-upgrade"] {
		rows = append(rows, m.kumaUpgradeRows()...)
	}
	return rows
}

func writeRestartFigureDetails(w io.Writer, m *measured, s settings) {
	if r := m.restart; r != nil {
		writeRestartDetails(w, "Zone egress restarts, kuma-cp's default timings",
			"One zone egress of mesh payments with a warm cache; each run disrupts the agent the previous run started (SIGTERM: it withdraws, drains and exits; SIGKILL: Envoy dies with it), starts it again at once with the same work and state dirs, polls its /ready every 2 ms until 200, then every 5 ms until the answer no longer says `cached`. kuma-cp's stream state and Dataplane store are the test control plane's (10 s deregistration delay, 1 s cache expiration).",
			append(append([]restartRun(nil), r.planned...), r.killed...))
	}
	if len(m.hung) > 0 {
		writeRestartDetails(w, "Restarts against a hung control plane",
			"The control plane hangs (Faults{Hang: true}: the kernel completes TCP handshakes, nothing is answered, its timers stop), the agent is SIGKILLed and started again; once /ready answers 200 the fault is cleared and the run follows the agent to live configuration.",
			m.hung)
	}
	if r := m.egressStop; r != nil && m.errs["egress-stop"] == nil {
		writeEgressStopDetails(w, r)
	}
	if r := m.egressRestart; r != nil && m.errs["egress-restart"] == nil {
		writeEgressRestartDetails(w, r)
	}
	if r := m.upgrade; r != nil && m.errs["upgrade"] == nil {
		writeUpgradeDetails(w, r, s)
	}
	if r := m.kumaUpgrade; r != nil && m.errs["kuma-upgrade"] == nil {
		writeKumaUpgradeDetails(w, r)
	}
}
