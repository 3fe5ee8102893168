package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// measured is everything one benchmark run found, for the report.
type measured struct {
	bin          binaryFacts
	binErr       error
	launchMethod string // how exec → Envoy launched was taken
	workDirs     string // where the agents' work dirs were
	startup      *startupResult
	cached       *cachedResult
	relay        *relayResult
	mesh         []meshRun
	waiters      []waitersResult
	idle         []idleRun
	scrape       *scrapeResult
	restart      *restartResult
	hung         []restartRun
	egressStop   *egressStopResult
	holdback     *holdbackResult
	upgrade      *upgradeResult
	kumaUpgrade  *kumaUpgradeResult
	large        *largeResult
	an           *analysis
	errs         map[string]error
	duration     time.Duration
	loadEnd      string

	// egressRestart: a lone egress restarted under sidecar load.
	egressRestart *egressRestartResult
}

func (b *bed) measure() ([]row, *measured) {
	m := &measured{errs: map[string]error{}, launchMethod: byKernel, workDirs: "work dirs on tmpfs, as under systemd's RuntimeDirectory"}
	if b.runDir == b.dir {
		m.workDirs = "work dirs on the temp dir's file system (" + sharedMemory + " is not tmpfs here)"
	}
	if b.execs == nil {
		m.launchMethod = "by the bench's fork → the wrapper's `date` stamp (no kernel exec events here: " + b.execsErr.Error() + ")"
	}
	m.bin, m.binErr = inspectBinary(b.zoneproxy)
	if b.s.figures["startup"] {
		progress("exec → Envoy launched, RSS at READY, SIGTERM → exit: %d cold runs (fresh state dir), %d with the version cache warm", b.s.coldRuns, b.s.runs)
		res, err := b.startupFigure(b.zoneproxy, b.s.coldRuns, b.s.runs, b.s.rsaRuns, true)
		m.startup, m.errs["startup"] = &res, err
	}
	if b.s.figures["cached"] {
		progress("control plane down, warm last-known-good cache: exec → /ready 200, %d runs", b.s.cachedRuns)
		res, err := b.cachedFigure()
		m.cached, m.errs["cached"] = &res, err
	}
	if b.s.figures["mesh"] {
		progress("mesh created → Envoy launched: %d agents, creation at a random point within %s of their first wait", b.s.meshRuns, b.s.meshPhase)
		m.mesh, m.errs["mesh"] = b.meshFigure()
	}
	if b.s.figures["waiters"] {
		progress("%d proxies waiting for a missing mesh: %d rounds of %s warm-up + %s window", b.s.waiters, b.s.waitRounds, b.s.waitWarmup, b.s.waitWindow)
		m.waiters, m.errs["waiters"] = b.waitersFigure()
	}
	if b.s.figures["idle"] {
		progress("idle CPU: %d agents, %s after READY", b.s.idleAgents, b.s.idleWindow)
		m.idle, m.errs["idle"] = b.idleFigure()
	}
	if b.s.figures["scrape"] {
		progress("MeshMetric scrape: %d pairs of Envoy /stats and a scrape of the agent's socket, %d-line body", b.s.scrapes, scrapeLines)
		res, err := b.scrapeFigure()
		m.scrape, m.errs["scrape"] = &res, err
	}
	if b.s.figures["relay"] {
		progress("relay overhead: %d runs of go test -bench of pkg/xds/relay's 1 MB benchmarks", relayCount)
		res, err := b.relayFigure()
		m.relay, m.errs["relay"] = &res, err
	}
	b.measureRestarts(m)
	if b.s.figures["large"] {
		progress("footprint under a large configuration: %d ingresses each with %v services and the default configuration", b.s.largeRuns, b.s.largeServices)
		res, err := b.largeFigure()
		m.large, m.errs["large"] = &res, err
	}
	if b.s.analyze && m.binErr == nil {
		an := b.analyze(m.bin)
		m.an = &an
	}
	m.duration = time.Since(b.started)
	m.loadEnd = loadAvg()
	return m.rows(b.s), m
}

func notRun(figure, target string, err error) row {
	res := "not run"
	if err != nil {
		res = "FAIL"
	}
	return row{Figure: figure, Median: "–", Min: "–", Max: "–", Target: target, Result: res}
}

func (m *measured) rows(s settings) []row {
	var rows []row
	const (
		fLaunch = "exec → Envoy launched (CP ready, loopback, version cache warm)"
		fRSS    = "agent RSS once Envoy is ready (agent only)"
		fBin    = "stripped binary size"
		fMesh   = "mesh created → Envoy launched (default retries)"
		fRate   = "CP requests per waiting proxy (%d waiting)"
		fDrain  = "SIGTERM → exit, `--drain-time 1s`, a connection held"
		fIdle   = "agent CPU while idle for %s after READY"
	)
	tLaunch := fmt.Sprintf("≤ %.0f ms median, no `--version` run", ms(targetLaunch))
	tRSS, tBin := fmt.Sprintf("≤ %.0f MiB, every run", targetRSSMiB), fmt.Sprintf("≤ %.0f MiB", targetBinaryMiB)
	tMesh := fmt.Sprintf("≤ 5.5 s worst of %d", s.meshRuns)
	tRate := fmt.Sprintf("≤ 0.25/s mean; busiest second ≤ %.1f× mean, every round", maxPeakToMean)
	tDrain := "≤ 2 s every run, no process left"
	tIdle := fmt.Sprintf("≤ %.2g %% of one core, every agent", targetIdlePercent)

	if st := m.startup; st != nil && len(st.runs) > 0 && m.errs["startup"] == nil {
		l := summarize(launches(st.runs))
		ran := versionRan(st.runs)
		note := fmt.Sprintf("`--version` ran in %d of %d; %s; %s", ran, len(st.runs), m.workDirs, m.launchMethod)
		if m.launchMethod == byKernel {
			note += fmt.Sprintf(" (by the bench's fork → the wrapper's `date` stamp, as before: %.1f ms)", summarize(launchesByWrapper(st.runs)).Median)
		}
		if len(st.cold) > 0 {
			note += fmt.Sprintf("; without the version cache (fresh state dir) %.1f ms median of %d", summarize(launches(st.cold)).Median, len(st.cold))
		}
		if len(st.rsa) > 0 {
			note += fmt.Sprintf("; against a control plane with an RSA 2048 key, as kuma-cp's self-signed default, %.1f ms median of %d (not judged)", summarize(launches(st.rsa)).Median, len(st.rsa))
		}
		note += st.floor.note()
		rows = append(rows, row{Figure: fLaunch, Runs: l.N, Median: fmtMs(l.Median), Min: fmtMs(l.Min), Max: fmtMs(l.Max),
			Target: tLaunch, Result: verdict(l.Median <= ms(targetLaunch) && ran == 0), Note: note})
		r := summarize(st.rss())
		rows = append(rows, row{Figure: fRSS, Runs: r.N, Median: fmtMiB(r.Median), Min: fmtMiB(r.Min), Max: fmtMiB(r.Max),
			Target: tRSS, Result: verdict(r.Max <= targetRSSMiB)})
	} else if s.figures["startup"] {
		rows = append(rows, notRun(fLaunch, tLaunch, m.errs["startup"]), notRun(fRSS, tRSS, m.errs["startup"]))
	}
	if s.figures["cached"] {
		rows = append(rows, m.cachedRow())
	}

	if m.binErr == nil {
		mib := kib2mib(m.bin.size / 1024)
		v := fmtMiB(float64(m.bin.size) / (1 << 20))
		ok := mib <= targetBinaryMiB && m.bin.stripped
		rows = append(rows, row{Figure: fBin, Runs: 1, Median: v, Min: v, Max: v, Target: tBin, Result: verdict(ok)})
	} else {
		rows = append(rows, notRun(fBin, tBin, m.binErr))
	}

	if s.figures["mesh"] {
		if m.errs["mesh"] == nil && len(m.mesh) > 0 {
			var xs []float64
			allExited := true
			for _, r := range m.mesh {
				xs = append(xs, r.latency.Seconds())
				allExited = allExited && r.exitedOK
			}
			x := summarize(xs)
			rows = append(rows, row{Figure: fMesh, Runs: x.N, Median: fmtS(x.Median), Min: fmtS(x.Min), Max: fmtS(x.Max),
				Target: tMesh, Result: verdict(x.Max <= targetMeshWait.Seconds() && allExited)})
		} else {
			rows = append(rows, notRun(fMesh, tMesh, m.errs["mesh"]))
		}
	}

	if s.figures["waiters"] {
		f := fmt.Sprintf(fRate, s.waiters)
		if len(m.waiters) > 0 && m.errs["waiters"] == nil {
			var rates, means, peaks []float64
			ok := true
			for _, w := range m.waiters {
				rates = append(rates, w.perProxy...)
				means = append(means, mean(w.perProxy))
				peaks = append(peaks, w.peakToMean())
				ok = ok && mean(w.perProxy) <= targetRate && w.peakToMean() <= maxPeakToMean && w.missing == 0 && w.exitedOK == w.n
			}
			x := summarize(rates)
			var pk []string
			for _, v := range peaks {
				pk = append(pk, fmt.Sprintf("%.2f×", v))
			}
			rows = append(rows, row{Figure: f, Runs: x.N, Median: fmt.Sprintf("%.3f/s", x.Median), Min: fmt.Sprintf("%.3f/s", x.Min),
				Max: fmt.Sprintf("%.3f/s", x.Max), Target: tRate,
				Result: verdict(ok), Note: fmt.Sprintf("mean %.3f/s, worst round %.3f/s; busiest second per round %s", mean(rates), summarize(means).Max, strings.Join(pk, ", "))})
		} else {
			rows = append(rows, notRun(f, tRate, m.errs["waiters"]))
		}
	}

	if st := m.startup; st != nil && len(st.runs) > 0 && m.errs["startup"] == nil {
		var xs []float64
		clean := true
		for _, r := range st.all() {
			xs = append(xs, r.drain.Seconds())
			clean = clean && r.code == 0 && len(r.envoyLeft) == 0 && len(r.other) == 0
		}
		x := summarize(xs)
		rows = append(rows, row{Figure: fDrain, Runs: x.N, Median: fmtS(x.Median), Min: fmtS(x.Min), Max: fmtS(x.Max),
			Target: tDrain, Result: verdict(x.Max <= targetDrain.Seconds() && clean)})
	} else if s.figures["startup"] {
		rows = append(rows, notRun(fDrain, tDrain, m.errs["startup"]))
	}

	if s.figures["idle"] {
		f := fmt.Sprintf(fIdle, s.idleWindow)
		if m.errs["idle"] == nil && len(m.idle) > 0 {
			// Judged on schedstat's nanoseconds: a 10 ms tick is 0.033 % of
			// 30 s, and which wake-ups a tick samples is chance.
			var xs, ticks []float64
			for _, r := range m.idle {
				xs = append(xs, r.nanosPercent())
				ticks = append(ticks, r.percent())
			}
			x, tx := summarize(xs), summarize(ticks)
			p := func(v float64) string { return fmt.Sprintf("%.3f %%", v) }
			rows = append(rows, row{Figure: f, Runs: x.N, Median: p(x.Median), Min: p(x.Min), Max: p(x.Max),
				Target: tIdle, Result: verdict(x.Max <= targetIdlePercent),
				Note: fmt.Sprintf("schedstat; in 10 ms ticks %s to %s", p(tx.Min), p(tx.Max))})
		} else {
			rows = append(rows, notRun(f, tIdle, m.errs["idle"]))
		}
	}
	if s.figures["scrape"] {
		rows = append(rows, m.scrapeRow())
	}
	if s.figures["relay"] {
		rows = append(rows, m.relayRow())
	}
	rows = append(rows, m.restartFigureRows(s)...)
	if s.figures["large"] {
		rows = append(rows, m.largeRows(s)...)
	}
	return rows
}

func (b *bed) writeReport(w io.Writer, rows []row, m *measured) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## zoneproxy benchmark results")
	p("")
	p("- command: `make bench`%s", settingsNote(b.s))
	for _, l := range machine() {
		p("- %s", l)
	}
	p("- load average at start / end: %s / %s; whole run %s", b.loadStart, m.loadEnd, m.duration.Round(time.Second))
	if m.binErr == nil {
		p("- binary: %s, %d bytes, stripped: %v, CGO_ENABLED=%s, %s, %d modules linked",
			b.origZP, m.bin.size, m.bin.stripped, m.bin.cgo, m.bin.goVer, len(m.bin.deps))
	}
	p("- Envoy: the stand-in (%s) behind a wrapper that stamps its pid and `date +%%s%%N` when run with `--config-path` and answers `--version` itself", strings.TrimSpace(b.versionLine))
	if b.execs != nil {
		p("- exec → Envoy launched: %s", byKernel)
	} else {
		p("- exec → Envoy launched: by the wrapper's stamp; the kernel's exec events are not available here (%v)", b.execsErr)
	}
	p("")
	writeTable(w, rows)
	for _, k := range figureNames {
		if err := m.errs[k]; err != nil {
			p("")
			p("**%s failed:** %v", k, err)
		}
	}

	if st := m.startup; st != nil && len(st.runs) > 0 {
		writeStartupDetails(w, st.runs, " with the version cache warm")
	}
	if st := m.startup; st != nil && len(st.cold) > 0 {
		writeStartupDetails(w, st.cold, " without a version cache (fresh state dir each)")
	}
	if m.cached != nil && m.errs["cached"] == nil {
		writeCachedDetails(w, m.cached)
	}
	if len(m.mesh) > 0 {
		writeMeshDetails(w, m.mesh)
	}
	if len(m.waiters) > 0 {
		writeWaitersDetails(w, m.waiters)
	}
	if len(m.idle) > 0 {
		p("")
		p("### Idle agents")
		p("")
		for i, r := range m.idle {
			p("- agent %d: %d ticks (utime+stime) in %s = %.3f %%; schedstat %.2f ms = %.4f %%; RSS after the window %d KiB (anon %d, file %d)",
				i+1, r.ticks, r.window.Round(time.Millisecond), r.percent(), float64(r.nanos)/1e6, r.nanosPercent(), r.rssAfter.RSS, r.rssAfter.Anon, r.rssAfter.File)
		}
	}
	if m.scrape != nil && m.errs["scrape"] == nil {
		writeScrapeDetails(w, m.scrape)
	}
	if m.relay != nil && m.errs["relay"] == nil {
		writeRelayDetails(w, m.relay)
	}
	writeRestartFigureDetails(w, m, b.s)
	if m.large != nil && m.errs["large"] == nil {
		writeLargeDetails(w, m.large)
	}
	if m.an != nil {
		writeAnalysis(w, m.an, m.startup)
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func settingsNote(s settings) string {
	if len(s.explicitSet) == 0 {
		return " (default settings)"
	}
	sort.Strings(s.explicitSet)
	return " with " + strings.Join(s.explicitSet, " ")
}

func writeStartupDetails(w io.Writer, runs []startupRun, label string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### Start-up%s, per phase (median of %d runs)", label, len(runs))
	p("")
	p("| phase | median | min | max |")
	p("|---|---:|---:|---:|")
	for _, name := range phaseNames {
		var xs []float64
		for _, r := range runs {
			if d, ok := r.phases[name]; ok {
				xs = append(xs, ms(d))
			}
		}
		x := summarize(xs)
		p("| %s | %.1f ms | %.1f ms | %.1f ms |", name, x.Median, x.Min, x.Max)
	}
	var launch, ready, cpu, anon, file, rss, hwm, threads, drain []float64
	full := 0
	for _, r := range runs {
		launch = append(launch, ms(r.launch))
		ready = append(ready, ms(r.ready))
		cpu = append(cpu, ms(r.cpuToReady))
		rss = append(rss, float64(r.mem.RSS))
		hwm = append(hwm, float64(r.mem.HWM))
		anon = append(anon, float64(r.mem.Anon))
		file = append(file, float64(r.mem.File))
		threads = append(threads, float64(r.mem.Threads))
		drain = append(drain, ms(r.drain))
		if r.fullDrain {
			full++
		}
	}
	p("| **exec → Envoy launched** | **%.1f ms** | %.1f ms | %.1f ms |", summarize(launch).Median, summarize(launch).Min, summarize(launch).Max)
	p("")
	p("Log timestamps have millisecond resolution, so single phases are ±1 ms. Then: exec → `Envoy ready` median %.0f ms "+
		"(Envoy's own start plus the agent's polling of its /ready); agent CPU from exec to READY median %.0f ms.", summarize(ready).Median, summarize(cpu).Median)
	p("")
	p("Agent memory at READY (median): VmRSS %.0f KiB = RssAnon %.0f KiB + RssFile %.0f KiB (mapped binary and libraries); peak VmHWM %.0f KiB; %.0f threads.",
		summarize(rss).Median, summarize(anon).Median, summarize(file).Median, summarize(hwm).Median, summarize(threads).Median)
	p("")
	p("SIGTERM → exit: median %.0f ms; %d of %d runs drained for the full `--drain-time` (the held connection kept Envoy busy), every run exited 0 with no process left: %v.",
		summarize(drain).Median, full, len(runs), allClean(runs))
}

func allClean(runs []startupRun) bool {
	for _, r := range runs {
		if r.code != 0 || len(r.envoyLeft) > 0 || len(r.other) > 0 {
			return false
		}
	}
	return true
}

func writeMeshDetails(w io.Writer, runs []meshRun) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	sorted := append([]meshRun(nil), runs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].latency > sorted[j].latency })
	p("")
	p("### Mesh created → Envoy launched")
	p("")
	p("Each agent waits for its own mesh; the mesh is created at a random moment after its first `waiting for mesh`, so creation falls at random points of the backoff (1 s, 2 s, 4 s, then 5 s with jitter). Slowest first:")
	p("")
	p("| mesh | created → launched | attempts before | backoff delay it fell into | at |")
	p("|---|---:|---:|---:|---:|")
	for _, r := range sorted {
		p("| %s | %.3f s | %d | %.2f s | %.0f %% |", r.mesh, r.latency.Seconds(), r.attempts, r.gap.Seconds(), r.phase*100)
	}
}

func writeWaitersDetails(w io.Writer, rounds []waitersResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	r0 := rounds[0]
	p("")
	p("### %d proxies waiting for a missing mesh", r0.n)
	p("")
	p("Each round starts %d fresh agents as close together as the machine allows (the worst case for lock-step), with the default retry settings, "+
		"and counts the control plane's /bootstrap requests by the Dataplane name in each body. Window: +%s to +%s, once the backoff has reached --retry-max; "+
		"lock-step would put a whole retry period's requests into one second, ≈ %.1f× the mean.", r0.n, r0.warmup, r0.warmup+r0.window, 1/mean(r0.perProxy))
	for i, r := range rounds {
		wb := r.windowBuckets()
		var xs []float64
		for _, c := range wb {
			xs = append(xs, float64(c))
		}
		total := 0
		for _, c := range r.buckets {
			total += c
		}
		p("")
		p("**Round %d** (agents started within %.0f ms): per proxy in the window mean %.3f req/s (min %.3f, max %.3f), from the start %.3f req/s; "+
			"per second in the window mean %.1f, min %.0f, max %.0f, stddev %.1f → **busiest second %.2f× the mean**; "+
			"%d requests, %d of %d agents exited 0 on SIGTERM, %d sent none.",
			i+1, ms(r.startSpan), mean(r.perProxy), summarize(r.perProxy).Min, summarize(r.perProxy).Max, mean(r.perProxyAll),
			mean(xs), summarize(xs).Min, summarize(xs).Max, stddev(xs), r.peakToMean(), total, r.exitedOK, r.n, r.missing)
		for _, pr := range r.problems {
			p("")
			p("```")
			p("%s", pr)
			p("```")
		}
		p("")
		p("```")
		from := int(r.warmup / time.Second)
		p("per second: %s|%s   (| = window start; scaled to the busiest second)", sparkline(r.buckets[:from]), sparkline(wb))
		for j := 0; j < len(r.buckets); j += 10 {
			end := min(j+10, len(r.buckets))
			var parts []string
			for _, c := range r.buckets[j:end] {
				parts = append(parts, fmt.Sprintf("%3d", c))
			}
			p("+%3ds %s", j, strings.Join(parts, " "))
		}
		p("```")
	}
}

func writeAnalysis(w io.Writer, an *analysis, lean *startupResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### Where the time and memory go")
	p("")
	if an.leanErr != nil {
		p("analysis failed: %v", an.leanErr)
	}
	it := an.leanInit
	p("- `zoneproxy version`, exec → exit: median %.1f ms. Package init (GODEBUG=inittrace=1): %.2f ms in all, %.0f KiB allocated; the largest:", it.execToMs, it.totalMs, it.allocKB)
	for _, c := range it.top {
		p("  - %s %.3f ms", c.name, c.v)
	}
	p("- the wrapper itself (sh, then `date`) takes %.1f ms from exec to its stamp (median of 10): part of every launch figure, as it was of the incumbent's.", an.wrapperMs)
	p("- the stand-in's own `envoy --version` takes %.1f ms (median of %d); the wrapper answers it instead, as the incumbent's stub did.", an.standinVersionMedian, an.standinVersionSamples)
	heavy := "none"
	if len(an.lean.heavy) > 0 {
		heavy = strings.Join(an.lean.heavy, ", ")
	}
	p("- linked modules (`go version -m`): %d; of go-control-plane, grpc, protobuf, cncf/xds: %s.", len(an.lean.deps), heavy)
	if an.symTotal > 0 {
		sec := an.sections
		p("- the stripped binary's sections: .text %.2f MiB, .gopclntab %.2f MiB (function tables; they grow with the code), .rodata %.2f MiB, .noptrdata + .data %.2f MiB.",
			mib(sec[".text"]), mib(sec[".gopclntab"]), mib(sec[".rodata"]), mib(sec[".noptrdata"]+sec[".data"]))
		p("- code and data by module (ELF symbol sizes of an unstripped build, %d bytes; %.1f MiB of sized symbols in all, BSS excluded):", an.unstrippedSize, an.symTotal/(1<<20))
		p("")
		p("| module or std package | KiB | share |")
		p("|---|---:|---:|")
		for _, c := range an.bySize[:min(12, len(an.bySize))] {
			p("| %s | %.0f | %.1f %% |", c.name, c.v/1024, c.v/an.symTotal*100)
		}
		var mods []string
		for _, c := range an.bySize {
			if !strings.HasPrefix(c.name, "std: ") && !strings.HasPrefix(c.name, "Go runtime") && c.v >= 512 {
				mods = append(mods, fmt.Sprintf("%s %.0f", c.name, c.v/1024))
			}
		}
		p("")
		p("Every module other than the standard library, KiB: %s.", strings.Join(mods, ", "))
	}
	p("")
	if an.heavyErr != nil {
		p("Comparison build with the Envoy protos and gRPC linked: failed: %v", an.heavyErr)
		return
	}
	if an.heavyStartup == nil || len(an.heavyStartup.runs) == 0 {
		return
	}
	hs := an.heavyStartup
	p("#### Linking the Envoy protos and gRPC, measured")
	p("")
	p("A throwaway build (through `go build -overlay`, nothing written to the tree) blank-imports go-control-plane's bootstrap/v3 and xDS server, grpc and protojson into cmd/zoneproxy, as an agent that parsed the bootstrap as protos or served xDS itself would (this build already links grpc and protobuf for the OTLP push):")
	p("")
	p("| | this build | with the Envoy protos and xDS server |")
	p("|---|---:|---:|")
	p("| stripped size | %.1f MiB | %.1f MiB |", float64(an.lean.size)/(1<<20), float64(an.heavy.size)/(1<<20))
	p("| modules linked | %d | %d |", len(an.lean.deps), len(an.heavy.deps))
	p("| package init (inittrace sum) | %.2f ms | %.2f ms |", an.leanInit.totalMs, an.heavyInit.totalMs)
	p("| init allocations | %.0f KiB | %.0f KiB |", an.leanInit.allocKB, an.heavyInit.allocKB)
	p("| `zoneproxy version` exec → exit | %.1f ms | %.1f ms |", an.leanInit.execToMs, an.heavyInit.execToMs)
	var hl, hr, ha, hf []float64
	for _, r := range hs.runs {
		hl = append(hl, ms(r.launch))
		hr = append(hr, float64(r.mem.RSS))
		ha = append(ha, float64(r.mem.Anon))
		hf = append(hf, float64(r.mem.File))
	}
	launch, mem := "not measured", "not measured"
	if lean != nil && len(lean.runs) > 0 {
		var l, r, a, f []float64
		for _, x := range lean.runs {
			l = append(l, ms(x.launch))
			r = append(r, float64(x.mem.RSS))
			a = append(a, float64(x.mem.Anon))
			f = append(f, float64(x.mem.File))
		}
		launch = fmt.Sprintf("%.1f ms (%d runs)", summarize(l).Median, len(l))
		mem = fmt.Sprintf("%.0f KiB (anon %.0f + file %.0f)", summarize(r).Median, summarize(a).Median, summarize(f).Median)
	}
	p("| exec → Envoy launched, median | %s | %.1f ms (%d runs) |", launch, summarize(hl).Median, len(hl))
	p("| RSS at READY, median | %s | %.0f KiB (anon %.0f + file %.0f) |", mem, summarize(hr).Median, summarize(ha).Median, summarize(hf).Median)
}
