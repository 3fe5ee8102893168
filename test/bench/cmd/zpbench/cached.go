package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// targetCachedLive bounds exec → /ready 200 with the control plane down
// and a warm last-known-good cache, on top of the stand-in's own start.
const targetCachedLive = 300 * time.Millisecond

const logFromCache = "starting Envoy on the last-known-good configuration"

// cachedRun is one start with the control plane down.
type cachedRun struct {
	fallback   time.Duration // exec → the agent gives up on the control plane and takes the cache
	launch     time.Duration // exec → Envoy launched (wrapper stamp)
	envoyReady time.Duration // exec → "Envoy ready"
	ready      time.Duration // exec → /ready 200
	mem        memStatus     // agent, at READY
	body       string        // /ready's answer
}

type cachedResult struct {
	runs      []cachedRun
	standin   []float64 // the stand-in's own start, ms
	resources int       // in the cache
	cacheSize int64
}

// liveOverStandin is the median start minus the stand-in's own median
// start: what the target bounds.
func (r cachedResult) liveOverStandin() float64 {
	var xs []float64
	for _, c := range r.runs {
		xs = append(xs, ms(c.ready))
	}
	return summarize(xs).Median - summarize(r.standin).Median
}

// cachedFigure: one agent runs with the control plane up until READY and
// stops cleanly, leaving its configuration cached in its state dir; the
// control plane then refuses connections, and each run starts the same
// proxy (same work dir and state dir, as a restart does) until its /ready
// answers 200.
func (b *bed) cachedFigure() (cachedResult, error) {
	var r cachedResult
	p, err := b.newProxy("payments", "bench-cached")
	if err != nil {
		return r, err
	}
	if err := b.fillCache(p); err != nil {
		return r, err
	}
	st := lkgcache.Inspect(p.stateDir, lkgcache.Identity{Mesh: p.mesh, Name: p.name, Role: "ingress", ControlPlane: b.cp.URL()}, 0, time.Now())
	if !st.Present || st.Problem != "" {
		return r, fmt.Errorf("the cache left by a clean stop would not be served: %s", st.Problem)
	}
	r.resources = st.Resources
	if fi, err := os.Stat(st.Path); err == nil {
		r.cacheSize = fi.Size()
	}

	b.cp.SetFaults(controlplane.Faults{RefuseConnections: true})
	defer b.cp.SetFaults(controlplane.Faults{})
	if r.standin, err = b.standinStarts(b.s.cachedRuns); err != nil {
		return r, err
	}
	for i := 0; i < b.s.cachedRuns; i++ {
		q := p
		q.stamp = fmt.Sprintf("%s-cached%02d", p.stamp, i)
		c, err := b.cachedRun(q)
		if err != nil {
			return r, fmt.Errorf("run %d: %w", i+1, err)
		}
		r.runs = append(r.runs, c)
		progress("  run %d: /ready 200 after %.1f ms (Envoy launched at %.1f ms)", i+1, ms(c.ready), ms(c.launch))
	}
	return r, nil
}

// fillCache runs p with the control plane up to READY, then stops it: the
// relay flushes the cache on the way out.
func (b *bed) fillCache(p proxy) error {
	a, err := b.start(b.zoneproxy, p)
	if err != nil {
		return err
	}
	defer a.kill()
	if _, err := a.awaitLog(logReady, 20*time.Second); err != nil {
		return err
	}
	if code, body := awaitReady(p.readiness); code != 200 {
		return fmt.Errorf("/ready: %d %s", code, body)
	}
	a.signal(syscall.SIGTERM)
	if code, err := a.wait(15 * time.Second); err != nil || code != 0 {
		return fmt.Errorf("stopping the agent that fills the cache: exit %d, %v", code, err)
	}
	return nil
}

func (b *bed) cachedRun(p proxy) (cachedRun, error) {
	var c cachedRun
	a, err := b.start(b.zoneproxy, p)
	if err != nil {
		return c, err
	}
	defer a.kill()
	url := "http://127.0.0.1:" + strconv.Itoa(p.readiness) + "/ready"
	var code int
	if !waitUntil(15*time.Second, 2*time.Millisecond, func() bool {
		code, c.body = readiness(p.readiness)
		return code == 200 || a.exited()
	}) || code != 200 {
		return c, fmt.Errorf("%s answered %d %q:\n%s", url, code, c.body, a.tail(15))
	}
	c.ready = time.Since(a.execAt)
	if !strings.Contains(c.body, "cached") {
		return c, fmt.Errorf("/ready 200 does not say the configuration is cached: %q", c.body)
	}
	if c.mem, err = readMem(a.pid()); err != nil {
		return c, err
	}
	launched, err := a.launchedAt(5 * time.Second)
	if err != nil {
		return c, err
	}
	c.launch = launched.Sub(a.execAt)
	for key, d := range map[string]*time.Duration{logFromCache: &c.fallback, logReady: &c.envoyReady} {
		line, err := a.awaitLog(key, 5*time.Second)
		if err != nil {
			return c, err
		}
		if t, ok := logTime(line); ok {
			*d = t.Sub(a.execAt)
		}
	}
	a.signal(syscall.SIGTERM)
	if code, err := a.wait(15 * time.Second); err != nil || code != 0 {
		return c, fmt.Errorf("stop: exit %d, %v", code, err)
	}
	return c, nil
}

// standinStarts measures the stand-in's own start: exec through the same
// wrapper the agent runs → its admin /ready answers 200 LIVE, with a
// bootstrap of nothing but an admin address, so it waits for no xDS.
func (b *bed) standinStarts(n int) ([]float64, error) {
	port, err := b.ports.next()
	if err != nil {
		return nil, err
	}
	doc := fmt.Sprintf("node:\n  id: bench-standin\n  cluster: bench\nadmin:\n  address:\n    socket_address:\n      address: 127.0.0.1\n      port_value: %d\n", port)
	cfg := filepath.Join(b.dir, "standin-static.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		return nil, err
	}
	client := http.Client{Timeout: time.Second}
	live := func() bool {
		resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/ready")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == 200
	}
	var out []float64
	for i := 0; i < n; i++ {
		cmd := exec.Command(b.wrapper, "--config-path", cfg)
		cmd.Env = append(agentEnv(), "ZPBENCH_STAMP="+filepath.Join(b.dir, "standin-stamp"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		ok := waitUntil(10*time.Second, time.Millisecond, live)
		d := time.Since(t0)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if !ok {
			return nil, fmt.Errorf("the stand-in with %s did not answer /ready 200 within 10s", cfg)
		}
		out = append(out, ms(d))
	}
	return out, nil
}

func (m *measured) cachedRow() row {
	const f = "control plane down, warm last-known-good cache: exec → agent /ready 200 (Envoy LIVE on the cache)"
	r := m.cached
	target := fmt.Sprintf("≤ %.0f ms + the stand-in's own start, median", ms(targetCachedLive))
	if r == nil || m.errs["cached"] != nil || len(r.runs) == 0 {
		return notRun(f, target, m.errs["cached"])
	}
	var xs []float64
	for _, c := range r.runs {
		xs = append(xs, ms(c.ready))
	}
	x := summarize(xs)
	over := r.liveOverStandin()
	return row{Figure: f, Runs: x.N, Median: fmtMs(x.Median), Min: fmtMs(x.Min), Max: fmtMs(x.Max),
		Target: target, Result: verdict(over <= ms(targetCachedLive)),
		Note: fmt.Sprintf("%.1f ms over the stand-in's own start of %.1f ms (median of %d)", over, summarize(r.standin).Median, len(r.standin))}
}

func writeCachedDetails(w io.Writer, r *cachedResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### Start with the control plane down, from the last-known-good cache (median of %d runs)", len(r.runs))
	p("")
	p("An agent ran to READY with the control plane up and stopped cleanly, leaving %d resources cached (%d bytes) in its state dir; "+
		"then the control plane refused connections, and each run started the same proxy (same work dir and state dir, as a restart does) "+
		"and polled its /ready every 2 ms until 200. The stand-in's own start was measured apart: exec through the same wrapper with a "+
		"bootstrap of nothing but an admin address (no xDS to wait for) → its admin /ready answers 200, polled every 1 ms.",
		r.resources, r.cacheSize)
	p("")
	p("| phase | median | min | max |")
	p("|---|---:|---:|---:|")
	col := func(name string, get func(cachedRun) time.Duration) {
		var xs []float64
		for _, c := range r.runs {
			xs = append(xs, ms(get(c)))
		}
		x := summarize(xs)
		p("| %s | %.1f ms | %.1f ms | %.1f ms |", name, x.Median, x.Min, x.Max)
	}
	col("exec → control plane refused, cache taken (`"+logFromCache+"`)", func(c cachedRun) time.Duration { return c.fallback })
	col("cache taken → Envoy launched", func(c cachedRun) time.Duration { return c.launch - c.fallback })
	col("Envoy launched → agent sees it LIVE (`Envoy ready`)", func(c cachedRun) time.Duration { return c.envoyReady - c.launch })
	col("`Envoy ready` → /ready 200", func(c cachedRun) time.Duration { return c.ready - c.envoyReady })
	col("**exec → /ready 200**", func(c cachedRun) time.Duration { return c.ready })
	s := summarize(r.standin)
	p("| the stand-in's own start, apart | %.1f ms | %.1f ms | %.1f ms |", s.Median, s.Min, s.Max)
	var rss, anon, file []float64
	for _, c := range r.runs {
		rss, anon, file = append(rss, float64(c.mem.RSS)), append(anon, float64(c.mem.Anon)), append(file, float64(c.mem.File))
	}
	p("")
	p("Log timestamps have millisecond resolution. The agent polls Envoy's /ready every 20 ms. Agent memory at READY on the cache (median): "+
		"VmRSS %.0f KiB (anon %.0f, file %.0f). /ready answered: %q.",
		summarize(rss).Median, summarize(anon).Median, summarize(file).Median, r.runs[len(r.runs)-1].body)
}
