package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/kumasock"
	"github.com/zoneproxy/zoneproxy/test/bench"
	"github.com/zoneproxy/zoneproxy/test/harness"
)

// scrapeLines is the size of Envoy's /stats body the figure is defined with.
const scrapeLines = 50_000

// prometheusAccept is what Prometheus sends when it scrapes: it asks for
// OpenMetrics first, and the hijacker answers in text 0.0.4, as kuma-dp's.
const prometheusAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// scrapeResult is the MeshMetric hijacker timed against Envoy's own /stats.
type scrapeResult struct {
	bodyLines, bodyBytes int
	outLines, outBytes   int
	direct, hijacked     []float64 // wall ms per request, in pairs
	agentCPU, envoyCPU   time.Duration
	memBefore, memAfter  memStatus
}

// extra is what the hijacker adds to Envoy's /stats: the difference of
// the medians, and per pair (the two requests of a pair ran back to back,
// so they saw the same load).
func (r scrapeResult) extra() (median float64, pairs []float64) {
	for i := range r.direct {
		pairs = append(pairs, r.hijacked[i]-r.direct[i])
	}
	return summarize(r.hijacked).Median - summarize(r.direct).Median, pairs
}

// agentCPUPerScrape is the agent's CPU per hijacked scrape: only those
// (and a 1 s dynconf poll) make it work during the loop.
func (r scrapeResult) agentCPUPerScrape() float64 {
	return ms(r.agentCPU) / float64(len(r.hijacked))
}

// envoyCPUPerStats is the stand-in's CPU per /stats it served: one for
// each direct GET and one for each hijacked scrape.
func (r scrapeResult) envoyCPUPerStats() float64 {
	return ms(r.envoyCPU) / float64(len(r.direct)+len(r.hijacked))
}

// scrapeFigure runs one agent to READY with the stand-in serving a
// generated 50k-line /stats, then alternates GETs of Envoy's own
// /stats?format=prometheus on its admin address with scrapes of the
// agent's MeshMetric socket.
func (b *bed) scrapeFigure() (scrapeResult, error) {
	var r scrapeResult
	body := bench.EnvoyStats(scrapeLines)
	r.bodyLines, r.bodyBytes = strings.Count(body, "\n"), len(body)
	statsFile := filepath.Join(b.dir, "envoy-stats.prom")
	if err := os.WriteFile(statsFile, []byte(body), 0o644); err != nil {
		return r, err
	}
	p, err := b.newProxy("payments", "bench-scrape")
	if err != nil {
		return r, err
	}
	p.env = []string{"ENVOY_STANDIN_STATS_FILE=" + statsFile}
	a, err := b.start(b.zoneproxy, p)
	if err != nil {
		return r, err
	}
	defer a.kill()
	if _, err := a.awaitLog(logReady, 20*time.Second); err != nil {
		return r, err
	}
	if code, msg := awaitReady(p.readiness); code != 200 {
		return r, fmt.Errorf("/ready: %d %s", code, msg)
	}
	doc, err := os.ReadFile(filepath.Join(p.workDir, "bootstrap.yaml"))
	if err != nil {
		return r, err
	}
	addr, err := envoy.AdminFromBootstrap(doc)
	if err != nil {
		return r, err
	}
	envoyPID := 0
	if kids := harness.Children(a.pid()); len(kids) > 0 {
		envoyPID = kids[0]
	}
	direct := scrapeTarget{client: addrClient(addr), url: adminURL(addr) + "/stats?format=prometheus"}
	hijacker := scrapeTarget{client: unixClient(kumasock.MetricsHijacker(p.workDir, p.name, p.mesh)),
		url: "http://localhost/meshmetric", accept: prometheusAccept}

	// The stand-in must answer the generated body, and the hijacker
	// without a MeshMetric policy passes every sample through.
	got, err := direct.get()
	if err != nil {
		return r, fmt.Errorf("Envoy's /stats: %w", err)
	}
	if got.bytes != r.bodyBytes {
		return r, fmt.Errorf("Envoy's /stats answered %d bytes, not the %d of ENVOY_STANDIN_STATS_FILE: is the stand-in current?", got.bytes, r.bodyBytes)
	}
	out, err := hijacker.get()
	if err != nil {
		return r, fmt.Errorf("the MeshMetric socket: %w", err)
	}
	if r.outLines, r.outBytes = out.lines, out.bytes; out.samples < got.samples {
		return r, fmt.Errorf("the MeshMetric socket answered %d samples, Envoy has %d", out.samples, got.samples)
	}
	for range 3 { // warm-up: connections, buffers, heap
		if _, err := direct.get(); err != nil {
			return r, err
		}
		if _, err := hijacker.get(); err != nil {
			return r, err
		}
	}

	r.memBefore, _ = readMem(a.pid())
	agent0, _ := cpuNanos(a.pid())
	envoy0, _ := cpuNanos(envoyPID)
	for i := range b.s.scrapes {
		// Alternate which goes first, so neither always follows the other.
		first, second := &direct, &hijacker
		if i%2 == 1 {
			first, second = second, first
		}
		for _, t := range []*scrapeTarget{first, second} {
			res, err := t.get()
			if err != nil {
				return r, fmt.Errorf("scrape %d: %w", i+1, err)
			}
			if t == &direct {
				r.direct = append(r.direct, ms(res.took))
			} else {
				r.hijacked = append(r.hijacked, ms(res.took))
			}
		}
	}
	agent1, _ := cpuNanos(a.pid())
	envoy1, _ := cpuNanos(envoyPID)
	r.agentCPU, r.envoyCPU = time.Duration(agent1-agent0), time.Duration(envoy1-envoy0)
	r.memAfter, _ = readMem(a.pid())

	a.signal(syscall.SIGTERM)
	if code, err := a.wait(15 * time.Second); err != nil || code != 0 {
		return r, fmt.Errorf("agent exit %d after the scrapes: %v\n%s", code, err, a.tail(10))
	}
	return r, nil
}

// scrapeTarget is one endpoint, read over a kept-alive connection as
// Prometheus (through Envoy) and the agent's admin client do.
type scrapeTarget struct {
	client      *http.Client
	url, accept string
}

type scrapeAnswer struct {
	took                  time.Duration // request sent → body read
	bytes, lines, samples int
}

func (t scrapeTarget) get() (scrapeAnswer, error) {
	var a scrapeAnswer
	req, err := http.NewRequest(http.MethodGet, t.url, nil)
	if err != nil {
		return a, err
	}
	if t.accept != "" {
		req.Header.Set("Accept", t.accept)
	}
	t0 := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return a, err
	}
	b, err := io.ReadAll(resp.Body)
	a.took = time.Since(t0)
	resp.Body.Close()
	if err != nil {
		return a, err
	}
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("GET %s: %d %.200s", t.url, resp.StatusCode, b)
	}
	a.bytes = len(b)
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			a.lines++
			if l[0] != '#' {
				a.samples++
			}
		}
	}
	return a, nil
}

func unixClient(socket string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// addrClient reaches Envoy's admin API where the bootstrap puts it.
func addrClient(addr envoy.AdminAddress) *http.Client {
	if addr.Socket != "" {
		return unixClient(addr.Socket)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
}

func adminURL(addr envoy.AdminAddress) string {
	if addr.Socket != "" {
		return "http://envoy-admin"
	}
	return "http://" + addr.TCP
}

// Targets of the scrape figure (docs/benchmarks.md says why): the time
// the hijacker adds to Envoy's own /stats, median, and the agent's CPU
// per scrape, which load does not inflate as much. The scrape parses and
// writes with expfmt, as kuma-dp does: a 50k-line page within 250 ms of
// CPU is under 2 % of a core at Prometheus's default 15 s interval.
const (
	targetScrapeExtraMs = 250.0
	targetScrapeCPUMs   = 250.0
)

func (m *measured) scrapeRow() row {
	const f = "MeshMetric scrape, 50k-line Envoy `/stats`: time the agent adds to Envoy's own /stats"
	target := fmt.Sprintf("≤ %.0f ms median; agent CPU ≤ %.0f ms per scrape", targetScrapeExtraMs, targetScrapeCPUMs)
	r := m.scrape
	if r == nil || m.errs["scrape"] != nil || len(r.direct) == 0 {
		return notRun(f, target, m.errs["scrape"])
	}
	extra, pairs := r.extra()
	direct := summarize(r.direct).Median
	ok := extra <= targetScrapeExtraMs && r.agentCPUPerScrape() <= targetScrapeCPUMs
	p := summarize(pairs)
	return row{Figure: f, Runs: len(pairs), Median: fmtMs(extra), Min: fmtMs(p.Min), Max: fmtMs(p.Max), Target: target,
		Result: verdict(ok), Note: fmt.Sprintf("agent CPU %.1f ms per scrape; Envoy's /stats %.1f ms, through the agent %.1f ms (medians); min and max per pair",
			r.agentCPUPerScrape(), direct, summarize(r.hijacked).Median)}
}

func writeScrapeDetails(w io.Writer, r *scrapeResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	d, h := summarize(r.direct), summarize(r.hijacked)
	extra, pairs := r.extra()
	pp := summarize(pairs)
	p("")
	p("### MeshMetric scrape")
	p("")
	p("The stand-in serves a generated /stats body (ENVOY_STANDIN_STATS_FILE): %d lines, %.1f MB. "+
		"%d pairs, each a GET of Envoy's own `/stats?format=prometheus` on its admin address and a scrape of the agent's "+
		"`kuma-mh-…sock` with Prometheus's Accept header, back to back and in alternating order, each over a kept-alive connection. "+
		"No MeshMetric policy is in force (the stand-in serves no dynamic-config listener): the agent reads Envoy's stats, parses them, "+
		"passes every family and writes them again, %d lines (%.1f MB) in Prometheus text with its own metrics appended.",
		r.bodyLines, float64(r.bodyBytes)/1e6, len(pairs), r.outLines, float64(r.outBytes)/1e6)
	p("")
	p("| | median | min | max |")
	p("|---|---:|---:|---:|")
	p("| Envoy's own /stats | %.1f ms | %.1f ms | %.1f ms |", d.Median, d.Min, d.Max)
	p("| the agent's MeshMetric socket | %.1f ms | %.1f ms | %.1f ms |", h.Median, h.Min, h.Max)
	p("| added by the agent, per pair | %.1f ms | %.1f ms | %.1f ms |", pp.Median, pp.Min, pp.Max)
	p("")
	p("Added by the agent, difference of the medians: **%.1f ms** (%.0f %% of Envoy's /stats). CPU: the agent %.1f ms per scrape, "+
		"the stand-in %.1f ms per /stats it served. Agent memory: VmRSS %d KiB (anon %d) before the scrapes, %d KiB (anon %d) after, peak VmHWM %d KiB.",
		extra, extra/d.Median*100, r.agentCPUPerScrape(), r.envoyCPUPerStats(),
		r.memBefore.RSS, r.memBefore.Anon, r.memAfter.RSS, r.memAfter.Anon, r.memAfter.HWM)
}
