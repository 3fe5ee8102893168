package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
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
// one per run, in ms.
type relayResult struct {
	direct, relay, relayCache []float64
	lines                     []string // the benchmark lines as go test printed them
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
		found := 0
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			line := sc.Text()
			name, median, ok := benchMedian(line)
			if !ok {
				continue
			}
			r.lines = append(r.lines, line)
			switch {
			case strings.HasPrefix(name, "BenchmarkDirect1MB"):
				r.direct = append(r.direct, median)
			case strings.HasPrefix(name, "BenchmarkRelay1MB/cache=false"):
				r.relay = append(r.relay, median)
			case strings.HasPrefix(name, "BenchmarkRelay1MB/cache=true"):
				r.relayCache = append(r.relayCache, median)
			default:
				continue
			}
			found++
		}
		if found != 3 {
			return r, fmt.Errorf("no median-ns/op for each of BenchmarkDirect1MB and BenchmarkRelay1MB/cache=false|true in:\n%s", out)
		}
	}
	return r, nil
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
	const f = "relay overhead per 1 MB xDS response and its ACK (relay with the cache − direct, `go test -bench`)"
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
		Note: fmt.Sprintf("direct %.2f ms, relay without the cache %.2f ms (+%.2f ms), with it %.2f ms; medians of %d runs' medians; Envoy's 256 MiB windows",
			summarize(r.direct).Median, summarize(r.relay).Median, overhead(r.relay, r.direct), summarize(r.relayCache).Median, relayCount)}
}

func writeRelayDetails(w io.Writer, r *relayResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("### Relay overhead per xDS response")
	p("")
	p("`go test -run '^$' -bench '^(BenchmarkDirect1MB|BenchmarkRelay1MB)$' -benchmem -count 1 ./pkg/xds/relay`, run %d times (direct and relay close in time): a delta response of 1000 listeners (1 MB), every one a new "+
		"version of each; the fake control plane (grpc-go, its defaults) answers every request with the next, so one op is a "+
		"response received and its ACK sent, by an Envoy side with Envoy's default HTTP/2 windows (256 MiB, no BDP probing): over "+
		"TLS straight from the control plane (direct), and through the relay's Unix socket, the relay observing the stream, "+
		"without and with the last-known-good cache writing behind (the agent's default).", relayCount)
	p("")
	p("```")
	for _, l := range r.lines {
		p("%s", l)
	}
	p("```")
}
