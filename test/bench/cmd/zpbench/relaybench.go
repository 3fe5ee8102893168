package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// targetRelayOverheadMs bounds what the relay adds to one 1 MB xDS
// response on its way to Envoy and Envoy's ACK back, median.
const targetRelayOverheadMs = 1.0

// relayCount is how many times `go test` runs the Go benchmarks, each
// once: direct and through the relay measured close in time, as other
// load on the machine comes and goes.
const relayCount = 5

// relayArgs run the 1 MB benchmarks once each.
var relayArgs = []string{"test", "-run", "^$", "-bench", "^(BenchmarkDirect1MB|BenchmarkRelay1MB)$", "-benchmem", "-count", "1", "./pkg/xds/relay"}

// relayResult holds the median-ns/op of pkg/xds/relay's 1 MB benchmarks,
// one per run, in ms: the relay's "settled" cases (a response that finds
// the relay idle, as kuma-cp's do) for the budget, its "back-to-back"
// ones (each response right after the last ACK) for what its CPU costs
// when responses come without a pause.
type relayResult struct {
	direct, relay, relayCache   []float64
	backToBack, backToBackCache []float64
	lines                       []string // the benchmark lines as go test printed them
}

// overhead is the relay's median minus the direct stream's, of the
// medians of the runs.
func overhead(relay, direct []float64) float64 {
	return summarize(relay).Median - summarize(direct).Median
}

// relayFigure runs pkg/xds/relay's benchmarks of a 1 MB delta response
// answered by an ACK: straight from the control plane over TLS, and
// through the relay without and with the last-known-good cache.
func (b *bed) relayFigure() (relayResult, error) {
	var r relayResult
	for range relayCount {
		cmd := exec.Command("go", relayArgs...)
		cmd.Dir = b.root
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return r, fmt.Errorf("go %s: %v\n%s", strings.Join(relayArgs, " "), err, out)
		}
		if err := r.add(string(out)); err != nil {
			return r, err
		}
	}
	return r, nil
}

// add reads one run's output: one median of each case.
func (r *relayResult) add(out string) error {
	cases := map[string]*[]float64{
		"BenchmarkDirect1MB":                         &r.direct,
		"BenchmarkRelay1MB/cache=false/settled":      &r.relay,
		"BenchmarkRelay1MB/cache=true/settled":       &r.relayCache,
		"BenchmarkRelay1MB/cache=false/back-to-back": &r.backToBack,
		"BenchmarkRelay1MB/cache=true/back-to-back":  &r.backToBackCache,
	}
	found := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		name, median, ok := benchMedian(line)
		if !ok {
			continue
		}
		name = withoutProcs(name)
		if dst := cases[name]; dst != nil && !found[name] {
			*dst = append(*dst, median)
			found[name] = true
			r.lines = append(r.lines, line)
		}
	}
	if len(found) != len(cases) {
		names := make([]string, 0, len(cases))
		for n := range cases {
			names = append(names, n)
		}
		slices.Sort(names)
		return fmt.Errorf("no median-ns/op for each of %s in:\n%s", strings.Join(names, ", "), out)
	}
	return nil
}

// withoutProcs is a benchmark's name without the -GOMAXPROCS go test
// appends when it is not 1.
func withoutProcs(name string) string {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// benchMedian reads the benchmark's name and its median-ns/op metric, in
// ms, from a `go test -bench` result line.
func benchMedian(line string) (string, float64, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", 0, false
	}
	for i := 2; i < len(f); i++ {
		if f[i] == "median-ns/op" {
			v, err := strconv.ParseFloat(f[i-1], 64)
			return f[0], v / 1e6, err == nil
		}
	}
	return "", 0, false
}

func (m *measured) relayRow() row {
	const f = "relay overhead per 1 MB xDS response and its ACK (relay with the cache − direct, `go test -bench`, settled)"
	target := fmt.Sprintf("≤ %.0f ms median", targetRelayOverheadMs)
	r := m.relay
	if r == nil || m.errs["relay"] != nil {
		return notRun(f, target, m.errs["relay"])
	}
	var per []float64 // per -count run, paired in order
	for i := 0; i < min(len(r.direct), len(r.relayCache)); i++ {
		per = append(per, r.relayCache[i]-r.direct[i])
	}
	x := summarize(per)
	over := overhead(r.relayCache, r.direct)
	return row{Figure: f, Runs: len(per), Median: fmtMs(over), Min: fmtMs(x.Min), Max: fmtMs(x.Max), Target: target,
		Result: verdict(over <= targetRelayOverheadMs),
		Note: fmt.Sprintf("direct %.2f ms, relay without the cache %.2f ms (+%.2f ms), with it %.2f ms; back to back (the relay reading each response "+
			"while the next is forwarded, on the same two cores) +%.2f ms without the cache, +%.2f ms with it; medians of %d runs' medians; Envoy's 256 MiB windows",
			summarize(r.direct).Median, summarize(r.relay).Median, overhead(r.relay, r.direct), summarize(r.relayCache).Median,
			overhead(r.backToBack, r.direct), overhead(r.backToBackCache, r.direct), len(per))}
}

func writeRelayDetails(w io.Writer, r *relayResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### Relay overhead per xDS response")
	p("")
	p("`go test -run '^$' -bench '^(BenchmarkDirect1MB|BenchmarkRelay1MB)$' -benchmem -count 1 ./pkg/xds/relay`, run %d times (direct and relay close in time): a delta response of 1000 listeners (1 MB), every one a new "+
		"version of each; the fake control plane (grpc-go, its defaults) answers every request with the next, sent when the op starts, so one op is a "+
		"response sent, received and ACKed, by an Envoy side with Envoy's default HTTP/2 windows (256 MiB, no BDP probing): over "+
		"TLS straight from the control plane (direct), and through the relay's Unix socket, the relay observing the stream, "+
		"without and with the last-known-good cache writing behind (the agent's default). `settled`: the next op starts once the relay has "+
		"read the last response and its ACK, untimed, as with kuma-cp, whose responses come seconds apart (the budget's figure); `back-to-back`: "+
		"at once, so the relay reads one response while it forwards the next, on the same two cores as both peers.", relayCount)
	p("")
	p("```")
	for _, l := range r.lines {
		p("%s", l)
	}
	p("```")
}
