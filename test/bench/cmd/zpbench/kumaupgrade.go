package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// The kuma-upgrade figure: a zone egress bootstrapped by kuma-cp 2.14
// under sidecar load while its control plane is replaced by 3.0 (same
// address, CA and token key, store rebuilt), then rolled back to 2.14,
// then upgraded again; each time, how long from the new control plane
// answering until an Envoy started from its bootstrap serves its live
// configuration (the agent's own handover, no restart).

const (
	kumaUpgradeMesh = "bench-kuma-upgrade"
	// kumaUpgradeDown is how long the control plane is gone each time.
	kumaUpgradeDown = time.Second
	// targetKumaLive is the issue's: live configuration within 30 s of the
	// new control plane answering.
	targetKumaLive = 30 * time.Second
)

// kumaUpgradeSteps are the releases the control plane becomes in turn.
var kumaUpgradeSteps = []string{controlplane.Kuma30, controlplane.Kuma214, controlplane.Kuma30}

type kumaUpgradeRun struct {
	to   string
	live time.Duration // the new control plane answering → /status protocolChange done
}

type kumaUpgradeResult struct {
	rate int
	runs []kumaUpgradeRun
	load loadWindow
	from time.Time
}

// protocolChangeOf is what /status says of the last change of ADS protocol.
type protocolChangeOf struct {
	ProtocolChange *struct {
		State string
		Says  string
		Since time.Time
	}
}

func (b *bed) kumaUpgradeFigure() (kumaUpgradeResult, error) {
	res := kumaUpgradeResult{rate: b.s.egressRate}
	cp, err := controlplane.Start(controlplane.Options{Dir: filepath.Join(b.dir, "cp-kuma-upgrade"), Meshes: []string{kumaUpgradeMesh}, Kuma: controlplane.Kuma214})
	if err != nil {
		return res, err
	}
	defer cp.Close()
	mainCP := b.cp
	b.cp = cp
	defer func() { b.cp = mainCP }()
	p, err := b.newEgress(kumaUpgradeMesh, "bench-kuma-upgrade")
	if err != nil {
		return res, err
	}
	p.args = append(p.args, "--drain-min", "0s")
	a, err := b.start(b.zoneproxy, p)
	if err != nil {
		return res, err
	}
	defer a.kill()
	if _, err := awaitLive(a, p.readiness, 20*time.Second); err != nil {
		return res, err
	}
	if !waitUntil(20*time.Second, 10*time.Millisecond, func() bool {
		_, err := os.Stat(cacheFile(p))
		return err == nil && cp.NodeStream(nodeID(p)).Connected
	}) {
		return res, fmt.Errorf("%s: no cache file, or kuma-cp does not count it connected: %+v\n%s", p.name, cp.NodeStream(nodeID(p)), a.tail(30))
	}
	load, err := b.sidecarsOn(kumaUpgradeMesh, 1, res.rate)
	if err != nil {
		return res, err
	}
	defer load.finish()
	res.from = time.Now()
	for _, to := range kumaUpgradeSteps {
		if err := cp.Upgrade(to, kumaUpgradeDown); err != nil {
			return res, err
		}
		answering := time.Now()
		var st protocolChangeOf
		if !waitUntil(2*targetKumaLive, 10*time.Millisecond, func() bool {
			return getStatus(p.readiness, &st) == nil && st.ProtocolChange != nil && st.ProtocolChange.State == "done" && st.ProtocolChange.Since.After(answering)
		}) {
			return res, fmt.Errorf("kuma-cp %s: no Envoy from its bootstrap within %s (/status: %+v)\n%s", to, 2*targetKumaLive, st.ProtocolChange, a.tail(40))
		}
		run := kumaUpgradeRun{to: to, live: time.Since(answering)}
		res.runs = append(res.runs, run)
		progress("  kuma-cp → %s: live configuration %.2f s after it answered: %s", to, run.live.Seconds(), st.ProtocolChange.Says)
		time.Sleep(3 * time.Second) // the old Envoy's drain (--drain-time 1s)
	}
	conns, none := load.finish()
	res.load = loadWindowOf(conns, none, res.from, time.Now())
	return res, nil
}

func (m *measured) kumaUpgradeRows() []row {
	const (
		fUp    = "kuma-cp 2.14 → 3.0 under a zone egress bootstrapped by 2.14: the new control plane answering → an Envoy from its bootstrap on live configuration, no restart"
		fBack  = "… rolled back 3.0 → 2.14 (kuma-cp holds the old stream for its 10 s deregistration delay)"
		fConns = "… connections refused or reset across the changes"
	)
	target := fmt.Sprintf("≤ %.0f s every run", targetKumaLive.Seconds())
	r := m.kumaUpgrade
	if err := m.errs["kuma-upgrade"]; r == nil || err != nil {
		return []row{notRun(fUp, target, err), notRun(fBack, target, err), notRun(fConns, "0", err)}
	}
	var up, back []kumaUpgradeRun
	for _, run := range r.runs {
		if run.to == controlplane.Kuma30 {
			up = append(up, run)
		} else {
			back = append(back, run)
		}
	}
	live := func(run kumaUpgradeRun) time.Duration { return run.live }
	upS, backS := durs(up, live), durs(back, live)
	return []row{
		secRow(fUp, target, upS, upS.Max <= targetKumaLive.Seconds(), "kuma-cp 3.0 refuses the state-of-the-world stream; the agent asks for its bootstrap and hands over to an Envoy started from it"),
		secRow(fBack, target, backS, backS.Max <= targetKumaLive.Seconds(), "2.14 serves delta too; its bootstrap asks for state of the world, so the agent hands over again"),
		countRow(fConns, len(r.runs), len(failedConns(r.load.conns)), r.load.note(r.from)),
	}
}

func writeKumaUpgradeDetails(w io.Writer, r *kumaUpgradeResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### kuma-cp upgraded and rolled back under a zone egress")
	p("")
	p("One zone egress of mesh %s (`--drain-time 1s --drain-min 0s`) bootstrapped by the test control plane in 2.14 mode with kuma-cp's default timings; "+
		"%d new sidecar connections per second to the egress kuma-cp hands out. The control plane is replaced (down %s, same address, CA and token key, store rebuilt) by each of %v in turn; "+
		"each time, from its listener being back until /status says an Envoy started from its bootstrap took over.", kumaUpgradeMesh, r.rate, kumaUpgradeDown, kumaUpgradeSteps)
	p("")
	p("| # | to | → live |")
	p("|---:|---|---:|")
	for i, run := range r.runs {
		p("| %d | kuma-cp %s | %s |", i+1, run.to, fmtS(run.live.Seconds()))
	}
	p("")
	p("- %s (kuma-cp's store is rebuilt: it hands out no egress until the proxy registers again)", r.load.note(r.from))
	writeFailedConns(w, failedConns(r.load.conns), r.from)
}
