package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// The footprint under a large configuration: a zone ingress of a zone
// with many MeshServices (the test control plane's Options.Services), its
// agent's memory once it runs on that configuration, the cache it keeps
// of it, and how long the configuration takes to reach Envoy.

// targetLargeRSSMiB bounds the agent's VmRSS with 1,000 services, every
// run; larger configurations are reported.
const (
	targetLargeRSSMiB   = 30.0
	targetLargeServices = 1000
)

// largeSettle is how long after the cache is complete the memory is read
// again: the Go runtime returns freed heap to the kernel in the background.
const largeSettle = 3 * time.Second

// xDS types as the control plane's log names them, in the order sent.
var largeTypes = []string{"Cluster", "ClusterLoadAssignment", "Listener"}

// largeRun is one ingress started on a configuration of services.
type largeRun struct {
	launch    time.Duration // exec → Envoy launched (the wrapper's stamp)
	ready     time.Duration // exec → /ready 200 READY on the control plane's configuration
	cached    time.Duration // exec → the cache file holds every resource
	cpu       time.Duration // agent CPU from exec until READY (schedstat)
	mem       memStatus     // once the cache is complete
	settled   memStatus     // largeSettle later
	goMem     goMemStats    // the agent's own /metrics, after settled
	cacheSize int64
	resources int
	roundTrip map[string]time.Duration // control plane's response → its ACK, per type
	respSize  map[string]int           // resources in that response
	code      int                      // SIGTERM → exit code
}

// goMemStats are the agent's go_memstats_* series, in bytes.
type goMemStats struct {
	heapAlloc, sys, nextGC float64
	ok                     bool
}

// largeResult is the runs for each service count.
type largeResult struct {
	counts []int
	runs   map[int][]largeRun
	// The heap profile of one more start at the largest count, by a build
	// of the tree with pprof added (only with ZPBENCH_ANALYZE on).
	profileServices int
	profile         string // `go tool pprof -top` of in-use space
	profileErr      error
}

// largeFigure runs b.s.largeRuns ingresses against a control plane whose
// ingresses carry n services, for n = 1 (the default configuration, for
// comparison) and each of b.s.largeServices.
func (b *bed) largeFigure() (largeResult, error) {
	res := largeResult{runs: map[int][]largeRun{}}
	counts := append([]int{1}, b.s.largeServices...)
	for i, n := range counts {
		profile := b.s.analyze && i == len(counts)-1 && n > 1
		runs, err := b.largeRuns(n, &res, profile)
		if err != nil {
			return res, fmt.Errorf("%d services: %w", n, err)
		}
		res.counts = append(res.counts, n)
		res.runs[n] = runs
	}
	return res, nil
}

// largeRuns starts a control plane with n services (answering at once: no
// cache-expiration sleep, so exec → READY is the agent's, Envoy's and the
// control plane's own work on the configuration) and runs that many
// ingresses on it, one at a time, each with a fresh state dir; with
// profile, one more start by the pprof build, into res.
func (b *bed) largeRuns(n int, res *largeResult, profile bool) ([]largeRun, error) {
	rec := newXDSRecorder()
	cp, err := controlplane.Start(controlplane.Options{Dir: filepath.Join(b.dir, fmt.Sprintf("cp-large-%d", n)), Meshes: []string{"payments"},
		Services: n, CacheExpiration: -1, Log: rec})
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	mainCP := b.cp
	b.cp = cp
	defer func() { b.cp = mainCP }()

	var runs []largeRun
	for i := 0; i < b.s.largeRuns; i++ {
		p, err := b.newProxy("payments", fmt.Sprintf("bench-large-%d-%d", n, i))
		if err != nil {
			return runs, err
		}
		r, err := b.largeRun(p, n, rec)
		if err != nil {
			return runs, fmt.Errorf("run %d: %w", i+1, err)
		}
		runs = append(runs, r)
		progress("  %s, run %d: READY after %.0f ms, VmRSS %d KiB (VmHWM %d KiB), %d KiB later; cache %d resources, %d KiB; LDS response → ACK %.1f ms",
			services(n), i+1, ms(r.ready), r.mem.RSS, r.mem.HWM, r.settled.RSS, r.resources, r.cacheSize/1024, ms(r.roundTrip["Listener"]))
	}
	if profile {
		progress("  %s: a heap profile of one more start, by a build of the tree with pprof added", services(n))
		res.profileServices = n
		res.profile, res.profileErr = b.largeHeapProfile(n)
	}
	return runs, nil
}

// pprofOverlay is added to cmd/zoneproxy (through -overlay, never on disk
// in the tree) for the heap profile: $ZPBENCH_PPROF names a loopback
// address that serves the heap profile, and nothing else.
const pprofOverlay = `package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("ZPBENCH_PPROF")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return
	}
	go http.Serve(ln, pprof.Handler("heap"))
}
`

// largeHeapProfile builds the tree's agent with pprofOverlay, starts it as
// an ingress on the current control plane (n services), and once it is
// READY with its cache complete takes the heap profile (after a GC) and
// returns pprof's top entries by in-use space.
func (b *bed) largeHeapProfile(n int) (string, error) {
	src := filepath.Join(b.dir, "pprof.go")
	overlay := filepath.Join(b.dir, "overlay-pprof.json")
	target := filepath.Join(b.root, "cmd", "zoneproxy", "zz_bench_pprof.go")
	if err := os.WriteFile(src, []byte(pprofOverlay), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(overlay, []byte(fmt.Sprintf(`{"Replace":{%q:%q}}`, target, src)), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(b.dir, "zoneproxy-pprof")
	if err := goBuild(b.root, append(buildTags(b.zoneproxy), "-overlay", overlay, "-ldflags", "-s -w"), bin, "./cmd/zoneproxy"); err != nil {
		return "", err
	}
	port, err := b.ports.next()
	if err != nil {
		return "", err
	}
	p, err := b.newProxy("payments", fmt.Sprintf("bench-large-%d-pprof", n))
	if err != nil {
		return "", err
	}
	p.env = append(p.env, "ZPBENCH_PPROF=127.0.0.1:"+strconv.Itoa(port))
	a, err := b.start(bin, p)
	if err != nil {
		return "", err
	}
	defer a.kill()
	if _, err := awaitLive(a, p.readiness, 60*time.Second); err != nil {
		return "", err
	}
	id := lkgcache.Identity{Mesh: p.mesh, Name: p.name, Role: p.role, ControlPlane: b.cp.URL()}
	if !waitUntil(30*time.Second, 5*time.Millisecond, func() bool {
		st := lkgcache.Inspect(p.stateDir, id, 0, time.Now())
		return st.Present && st.Problem == "" && st.Resources >= largeResources(n)
	}) {
		return "", fmt.Errorf("the cache was not complete 30 s after READY")
	}
	time.Sleep(largeSettle)
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/?gc=1")
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("heap profile: %d %v", resp.StatusCode, err)
	}
	file := filepath.Join(b.dir, "large-heap.pb.gz")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return "", err
	}
	a.signal(syscall.SIGTERM)
	_, _ = a.wait(15 * time.Second)
	cmd := exec.Command("go", "tool", "pprof", "-top", "-nodecount=12", "-sample_index=inuse_space", file)
	cmd.Dir = b.root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %v", err)
	}
	// Drop pprof's header lines up to the table's.
	text := string(out)
	if i := strings.Index(text, "Showing nodes"); i >= 0 {
		text = text[i:]
	}
	return strings.TrimSpace(text), nil
}

// largeResources is what the control plane sends an ingress with n
// services: n EDS clusters, their n ClusterLoadAssignments, the admin and
// readiness clusters, and the ingress listener.
func largeResources(n int) int { return 2*n + 3 }

func (b *bed) largeRun(p proxy, n int, rec *xdsRecorder) (largeRun, error) {
	r := largeRun{roundTrip: map[string]time.Duration{}, respSize: map[string]int{}}
	a, err := b.start(b.zoneproxy, p)
	if err != nil {
		return r, err
	}
	defer a.kill()
	var code int
	var body string
	if !waitUntil(60*time.Second, 2*time.Millisecond, func() bool {
		code, body = readyFull(p.readiness)
		return (code == 200 && strings.HasPrefix(body, "READY") && !isCached(body)) || a.exited()
	}) || code != 200 {
		return r, fmt.Errorf("/ready answered %d %q:\n%s", code, body, a.tail(15))
	}
	r.ready = time.Since(a.execAt)
	nanos, _ := cpuNanos(a.pid())
	r.cpu = time.Duration(nanos)
	launched, err := a.launchedAt(5 * time.Second)
	if err != nil {
		return r, err
	}
	r.launch = launched.Sub(a.execAt)

	// The cache is written behind the stream: wait until it holds all.
	want := largeResources(n)
	id := lkgcache.Identity{Mesh: p.mesh, Name: p.name, Role: p.role, ControlPlane: b.cp.URL()}
	var st lkgcache.Status
	if !waitUntil(30*time.Second, 5*time.Millisecond, func() bool {
		st = lkgcache.Inspect(p.stateDir, id, 0, time.Now())
		return st.Present && st.Problem == "" && st.Resources >= want
	}) {
		return r, fmt.Errorf("the cache %s holds %d resources (%q), want %d, 30 s after READY", st.Path, st.Resources, st.Problem, want)
	}
	r.cached = time.Since(a.execAt)
	r.resources = st.Resources
	if fi, err := os.Stat(st.Path); err == nil {
		r.cacheSize = fi.Size()
	}
	if r.mem, err = readMem(a.pid()); err != nil {
		return r, err
	}
	time.Sleep(largeSettle)
	if r.settled, err = readMem(a.pid()); err != nil {
		return r, err
	}
	r.goMem = agentGoMem(p.readiness)

	node := nodeID(p)
	if nack := rec.nack(node); nack != "" {
		return r, fmt.Errorf("Envoy rejected the configuration: %s", nack)
	}
	for _, typ := range largeTypes {
		rt, size, ok := rec.roundTrip(node, typ)
		if !ok {
			return r, fmt.Errorf("no %s response and ACK for %s in the control plane's log", typ, node)
		}
		r.roundTrip[typ], r.respSize[typ] = rt, size
	}

	a.signal(syscall.SIGTERM)
	if r.code, err = a.wait(15 * time.Second); err != nil {
		return r, err
	}
	if r.code != 0 {
		return r, fmt.Errorf("exit %d after SIGTERM:\n%s", r.code, a.tail(10))
	}
	return r, nil
}

// agentGoMem reads the Go runtime's memory from the agent's /metrics.
// The scrape asks Envoy's stats too: it is read after the RSS samples.
func agentGoMem(port int) goMemStats {
	var g goMemStats
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	if err != nil {
		return g
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := 0
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_memstats_heap_alloc_bytes":
			g.heapAlloc = x
		case "go_memstats_sys_bytes":
			g.sys = x
		case "go_memstats_next_gc_bytes":
			g.nextGC = x
		default:
			continue
		}
		found++
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	g.ok = found == 3
	return g
}

// xdsRecorder reads the test control plane's log as it is written: when
// each response was handed to the stream (nonce and resource count) and
// when its ACK or NACK came back.
type xdsRecorder struct {
	mu    sync.Mutex
	sent  map[string]xdsSent // node|nonce
	first map[string]string  // node|type → the nonce of the first response of that type
	acks  map[string]time.Time
	nacks map[string]string // node → the first NACK's line
}

type xdsSent struct {
	at        time.Time
	typ       string
	resources int
}

func newXDSRecorder() *xdsRecorder {
	return &xdsRecorder{sent: map[string]xdsSent{}, first: map[string]string{}, acks: map[string]time.Time{}, nacks: map[string]string{}}
}

// Write takes one log line ("<time> ads: sent node=… type=… nonce=…
// resources=[…] removed=[…]" or "<time> ads: ACK node=… type=… nonce=…"),
// stamped on arrival: the log's own times are milliseconds.
func (x *xdsRecorder) Write(p []byte) (int, error) {
	now := time.Now()
	_, msg, _ := strings.Cut(string(p), " ")
	kind, rest, ok := strings.Cut(msg, " node=")
	if !ok {
		return len(p), nil
	}
	node, rest, _ := strings.Cut(rest, " type=")
	typ, rest, _ := strings.Cut(rest, " nonce=")
	nonce, rest, _ := strings.Cut(rest, " ")
	nonce = strings.TrimRight(nonce, ":\n")
	x.mu.Lock()
	defer x.mu.Unlock()
	switch kind {
	case "ads: sent":
		n := 0
		if list, _, ok := strings.Cut(strings.TrimPrefix(rest, "resources=["), "]"); ok && list != "" {
			n = strings.Count(list, " ") + 1
		}
		x.sent[node+"|"+nonce] = xdsSent{at: now, typ: typ, resources: n}
		if _, ok := x.first[node+"|"+typ]; !ok {
			x.first[node+"|"+typ] = nonce
		}
	case "ads: ACK":
		x.acks[node+"|"+nonce] = now
	case "ads: NACK":
		if _, ok := x.nacks[node]; !ok {
			x.nacks[node] = strings.TrimSpace(msg)
		}
	}
	return len(p), nil
}

// roundTrip is the first response of typ to node → its ACK, and the
// resources in it.
func (x *xdsRecorder) roundTrip(node, typ string) (time.Duration, int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	nonce, ok := x.first[node+"|"+typ]
	if !ok {
		return 0, 0, false
	}
	s := x.sent[node+"|"+nonce]
	ack, ok := x.acks[node+"|"+nonce]
	if !ok {
		return 0, 0, false
	}
	return ack.Sub(s.at), s.resources, true
}

func (x *xdsRecorder) nack(node string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.nacks[node]
}

// largeRows are one row per service count: the agent's VmRSS once the
// cache is complete, judged at targetLargeServices and below.
func (m *measured) largeRows(s settings) []row {
	const f = "agent RSS, zone ingress with %s (READY on its configuration, cache written)"
	var rows []row
	counts := append([]int{1}, s.largeServices...)
	if m.large == nil || m.errs["large"] != nil {
		for _, n := range counts {
			rows = append(rows, notRun(fmt.Sprintf(f, services(n)), largeTarget(n), m.errs["large"]))
		}
		return rows
	}
	for _, n := range m.large.counts {
		runs := m.large.runs[n]
		var rss, hwm, ready, cache []float64
		for _, r := range runs {
			rss = append(rss, kib2mib(r.mem.RSS))
			hwm = append(hwm, kib2mib(r.mem.HWM))
			ready = append(ready, ms(r.ready))
			cache = append(cache, float64(r.cacheSize)/1024)
		}
		x := summarize(rss)
		result := "reported"
		if n > 1 && n <= targetLargeServices {
			result = verdict(x.Max <= targetLargeRSSMiB)
		}
		rows = append(rows, row{Figure: fmt.Sprintf(f, services(n)), Runs: x.N, Median: fmtMiB(x.Median), Min: fmtMiB(x.Min), Max: fmtMiB(x.Max),
			Target: largeTarget(n), Result: result,
			Note: fmt.Sprintf("VmHWM %.1f MiB worst; cache file %.0f KiB; exec → READY %.0f ms median", summarize(hwm).Max, summarize(cache).Median, summarize(ready).Median)})
	}
	return rows
}

func largeTarget(n int) string {
	if n > 1 && n <= targetLargeServices {
		return fmt.Sprintf("≤ %.0f MiB, every run", targetLargeRSSMiB)
	}
	return "none (reported)"
}

// services names a service count: "1 service", "1,000 services".
func services(n int) string {
	if n == 1 {
		return "1 service"
	}
	return thousands(n) + " services"
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func writeLargeDetails(w io.Writer, r *largeResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### Footprint under a large configuration")
	p("")
	p("A zone ingress (fresh state dir each run) against a test control plane whose ingress xDS carries N MeshServices as kuma-cp sends them: "+
		"per service an EDS cluster, its ClusterLoadAssignment (%d endpoints; 1 for `backend`) and a filter chain matching its SNI on the ingress listener. "+
		"The control plane answers at once (no cache-expiration sleep; kuma-cp's default adds 1 s to exec → READY). "+
		"Memory is read once `/ready` says READY on the control plane's configuration and the cache file `<state-dir>/xds/xds-lkg` holds every resource, "+
		"then %s later; the Go runtime's figures are the agent's `/metrics` after that. Response → ACK is from the control plane handing the first response "+
		"of a type to the stream to the ACK arriving: through the relay, the stand-in's validation and apply, and back. Medians of the runs:",
		controlplane.EndpointsPerService, largeSettle)
	p("")
	p("| services | runs | resources | cache file | exec → Envoy launched | exec → READY | exec → cache complete | agent CPU to READY | VmRSS | VmHWM | VmRSS %s later | Go heap in use / from the OS / next GC | CDS → ACK | EDS → ACK | LDS → ACK |", largeSettle)
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
	for _, n := range r.counts {
		runs := r.runs[n]
		med := func(get func(largeRun) float64) float64 {
			var xs []float64
			for _, x := range runs {
				xs = append(xs, get(x))
			}
			return summarize(xs).Median
		}
		goMem := "–"
		if len(runs) > 0 && runs[0].goMem.ok {
			goMem = fmt.Sprintf("%.1f / %.1f / %.1f MiB", med(func(x largeRun) float64 { return mib(uint64(x.goMem.heapAlloc)) }),
				med(func(x largeRun) float64 { return mib(uint64(x.goMem.sys)) }), med(func(x largeRun) float64 { return mib(uint64(x.goMem.nextGC)) }))
		}
		rt := func(typ string) string {
			return fmt.Sprintf("%.1f ms (%d)", med(func(x largeRun) float64 { return ms(x.roundTrip[typ]) }),
				int(med(func(x largeRun) float64 { return float64(x.respSize[typ]) })))
		}
		p("| %s | %d | %.0f | %.0f KiB | %.1f ms | %.0f ms | %.0f ms | %.0f ms | %.1f MiB | %.1f MiB | %.1f MiB | %s | %s | %s | %s |",
			thousands(n), len(runs), med(func(x largeRun) float64 { return float64(x.resources) }),
			med(func(x largeRun) float64 { return float64(x.cacheSize) / 1024 }),
			med(func(x largeRun) float64 { return ms(x.launch) }), med(func(x largeRun) float64 { return ms(x.ready) }),
			med(func(x largeRun) float64 { return ms(x.cached) }), med(func(x largeRun) float64 { return ms(x.cpu) }),
			med(func(x largeRun) float64 { return kib2mib(x.mem.RSS) }), med(func(x largeRun) float64 { return kib2mib(x.mem.HWM) }),
			med(func(x largeRun) float64 { return kib2mib(x.settled.RSS) }), goMem, rt("Cluster"), rt("ClusterLoadAssignment"), rt("Listener"))
	}
	p("")
	p("(In parentheses: the resources in that response.) VmRSS = RssAnon + RssFile; per run (anon + file, KiB):")
	p("")
	for _, n := range r.counts {
		var parts []string
		for _, x := range r.runs[n] {
			parts = append(parts, fmt.Sprintf("%d (%d + %d), HWM %d", x.mem.RSS, x.mem.Anon, x.mem.File, x.mem.HWM))
		}
		p("- %s: %s", services(n), strings.Join(parts, "; "))
	}
	if r.profileServices == 0 {
		return
	}
	p("")
	p("Heap of one more start with %s, READY and its cache complete, %s later, after a GC, by a build of the tree with a pprof handler added (`go tool pprof -top -sample_index=inuse_space`; sampled, so approximate):", services(r.profileServices), largeSettle)
	p("")
	if r.profileErr != nil {
		p("heap profile failed: %v", r.profileErr)
		return
	}
	p("```")
	p("%s", r.profile)
	p("```")
}
