package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	if s := summarize([]float64{3, 1, 2}); s != (summary{N: 3, Median: 2, Min: 1, Max: 3}) {
		t.Errorf("odd: %+v", s)
	}
	if s := summarize([]float64{4, 1, 2, 3}); s.Median != 2.5 || s.Min != 1 || s.Max != 4 {
		t.Errorf("even: %+v", s)
	}
}

func TestHistogramAndSparkline(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	got := histogram([]time.Time{at(-1), at(0), at(999), at(1000), at(2500), at(3000)}, t0, time.Second, 3)
	if want := []int{2, 1, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("histogram %v, want %v", got, want)
	}
	if s := sparkline([]int{0, 1, 4, 8}); s != " ▁▄█" {
		t.Errorf("sparkline %q", s)
	}
	if s := sparkline([]int{0, 0}); s != "  " {
		t.Errorf("empty sparkline %q", s)
	}
}

func TestPeakToMean(t *testing.T) {
	w := waitersResult{warmup: 2 * time.Second, buckets: []int{50, 0, 10, 10, 10, 10}}
	if got := w.peakToMean(); got != 1 {
		t.Errorf("even spread: %v", got)
	}
	w.buckets = []int{0, 0, 40, 0, 0, 0}
	if got := w.peakToMean(); got != 4 {
		t.Errorf("lock-step: %v", got)
	}
}

func TestSymbolPackageAndGroup(t *testing.T) {
	mods := []string{"github.com/spf13/viper", "go.yaml.in/yaml/v3", "github.com/zoneproxy/zoneproxy"}
	for sym, want := range map[string]string{
		"github.com/spf13/viper.(*Viper).find":                  "github.com/spf13/viper",
		"type:*github.com/spf13/viper.Viper":                    "github.com/spf13/viper",
		"type:.eq.go.yaml.in/yaml/v3.Node":                      "go.yaml.in/yaml/v3",
		"github.com/zoneproxy/zoneproxy/pkg/agent.(*Agent).Run": "github.com/zoneproxy/zoneproxy",
		"slices.SortFunc[go.shape.string]":                      "std: slices",
		"crypto/internal/fips140/drbg.memory":                   "std: crypto",
		"vendor/golang.org/x/net/http2/hpack.huffmanDecode":     "std: vendor (x/net, x/crypto)",
		"runtime.mallocgc":                                      "std: runtime",
	} {
		if got := groupOf(symbolPackage(sym), mods); got != want {
			t.Errorf("%s: %q, want %q", sym, got, want)
		}
	}
}

func TestLogTimeAndStamp(t *testing.T) {
	ts, ok := logTime("2026-11-22T14:22:39.547Z\tINFO\tzoneproxy\tstarting\t{}")
	if !ok || ts.UnixMilli() != time.Date(2026, 11, 22, 14, 22, 39, 547e6, time.UTC).UnixMilli() {
		t.Errorf("logTime: %v %v", ts, ok)
	}
	if _, ok := logTime("no tab here"); ok {
		t.Error("parsed a line without a timestamp")
	}
	path := filepath.Join(t.TempDir(), "stamp")
	if err := os.WriteFile(path, []byte("1795357370637268738\n1795357370999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readStamp(path)
	if err != nil || got.UnixNano() != 1795357370637268738 {
		t.Errorf("readStamp: %v %v", got.UnixNano(), err)
	}
}

func TestPhases(t *testing.T) {
	exec := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lines := []string{
		"2026-01-01T00:00:00.003Z\tINFO\tzoneproxy\tstarting\t{}",
		"2026-01-01T00:00:00.004Z\tINFO\tzoneproxy\tfound Envoy\t{\"version-cached\": true}",
		"2026-01-01T00:00:00.006Z\tINFO\tzoneproxy\trequesting bootstrap\t{}",
		"2026-01-01T00:00:00.011Z\tINFO\tzoneproxy\treceived bootstrap\t{}",
	}
	got := phases(lines, exec, 14*time.Millisecond)
	want := []time.Duration{3, 1, 2, 5, 3}
	for i, name := range phaseNames {
		if got[name] != want[i]*time.Millisecond {
			t.Errorf("%s = %v, want %v ms", name, got[name], want[i])
		}
	}
	if phases(lines[:3], exec, time.Millisecond) != nil {
		t.Error("phases without every log line")
	}
}

func TestWrapperStampsLaunchesNotVersionCalls(t *testing.T) {
	dir := t.TempDir()
	const version = "envoy  version: abc/1.39.0/Clean/RELEASE/BoringSSL"
	path, err := writeWrapper(dir, "/bin/true", version)
	if err != nil {
		t.Fatal(err)
	}
	stamp := filepath.Join(dir, "stamp")
	run := func(env []string, args ...string) string {
		cmd := exec.Command(path, args...)
		cmd.Env = append(os.Environ(), append(env, "ZPBENCH_STAMP="+stamp)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return string(out)
	}
	if out := run(nil, "--version"); !strings.Contains(out, version) {
		t.Errorf("--version printed %q", out)
	}
	if _, err := os.Stat(stamp); err == nil {
		t.Fatal("--version was stamped as a launch")
	}
	if _, err := readStamp(stamp + ".version"); err != nil {
		t.Errorf("no version stamp: %v", err)
	}
	before := time.Now()
	run(nil, "--config-path", "/dev/null", "--log-level", "info") // execs /bin/true
	got, err := readStamp(stamp)
	if err != nil || got.Before(before.Add(-time.Second)) {
		t.Errorf("launch stamp %v, %v", got, err)
	}
	if shQuote("it's") != `'it'\''s'` {
		t.Errorf("shQuote: %s", shQuote("it's"))
	}
}

func TestScrapeRowJudgesAddedTimeAndAgentCPU(t *testing.T) {
	for _, tc := range []struct {
		name             string
		direct, hijacked []float64
		agentCPU         time.Duration
		want             string
	}{
		// Added per pair 145, 244, 249 ms (median 244); CPU 200 ms a scrape.
		{"both within", []float64{5, 6, 7}, []float64{150, 250, 256}, 600 * time.Millisecond, "PASS"},
		// Median added 251 ms.
		{"added time over", []float64{5, 6, 7}, []float64{250, 257, 260}, 600 * time.Millisecond, "FAIL"},
		// 251 ms of CPU a scrape.
		{"agent CPU over", []float64{5, 6, 7}, []float64{150, 250, 256}, 753 * time.Millisecond, "FAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &measured{errs: map[string]error{}, scrape: &scrapeResult{direct: tc.direct, hijacked: tc.hijacked, agentCPU: tc.agentCPU}}
			if got := m.scrapeRow().Result; got != tc.want {
				t.Errorf("result %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLaunchRowNeedsTheVersionCacheWarm(t *testing.T) {
	warm := startupRun{launch: 8 * time.Millisecond}
	cold := startupRun{launch: 8 * time.Millisecond, version: 3 * time.Millisecond}
	for _, tc := range []struct {
		name string
		runs []startupRun
		want string
	}{
		{"fast, no --version", []startupRun{warm, warm, warm}, "PASS"},
		{"fast, but --version ran once", []startupRun{warm, cold, warm}, "FAIL"},
		{"slow", []startupRun{{launch: 45 * time.Millisecond}, warm, {launch: 42 * time.Millisecond}}, "FAIL"},
	} {
		m := &measured{errs: map[string]error{}, startup: &startupResult{runs: tc.runs}}
		if got := m.rows(settings{figures: map[string]bool{"startup": true}})[0]; got.Result != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.Result, got.Note, tc.want)
		}
	}
}

func TestCachedRowJudgesTheTimeOverTheStandinsOwnStart(t *testing.T) {
	runs := func(msecs ...int) []cachedRun {
		var out []cachedRun
		for _, v := range msecs {
			out = append(out, cachedRun{ready: time.Duration(v) * time.Millisecond})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		runs    []cachedRun
		standin []float64
		want    string
	}{
		{"within, thanks to a slow stand-in", runs(320, 350, 900), []float64{60, 70, 80}, "PASS"},
		{"over", runs(320, 380, 900), []float64{60, 70, 80}, "FAIL"},
	} {
		m := &measured{errs: map[string]error{}, cached: &cachedResult{runs: tc.runs, standin: tc.standin}}
		if got := m.cachedRow(); got.Result != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.Result, got.Note, tc.want)
		}
	}
}

func TestRelayFigureReadsGoBenchmarkMedians(t *testing.T) {
	line := func(name string, median int) string {
		return fmt.Sprintf("%s   	     480	   2776066 ns/op	 396.63 MB/s	   %d median-ns/op	 1122423 B/op	     120 allocs/op", name, median)
	}
	name, v, ok := benchMedian(line("BenchmarkRelay1MB/cache=true/settled-2", 3245798))
	if !ok || name != "BenchmarkRelay1MB/cache=true/settled-2" || v != 3.245798 {
		t.Fatalf("benchMedian: %q %v %v", name, v, ok)
	}
	if _, _, ok := benchMedian("PASS"); ok {
		t.Error("PASS read as a benchmark")
	}

	run := []string{
		line("BenchmarkDirect1MB-2", 2_400_000),
		line("BenchmarkRelay1MB/cache=false/back-to-back-2", 4_000_000),
		line("BenchmarkRelay1MB/cache=false/settled-2", 3_000_000),
		line("BenchmarkRelay1MB/cache=true/back-to-back-2", 4_100_000),
		line("BenchmarkRelay1MB/cache=true/settled-2", 3_100_000),
		"PASS",
	}
	var r relayResult
	if err := r.add(strings.Join(run, "\n")); err != nil {
		t.Fatal(err)
	}
	if r.direct[0] != 2.4 || r.relay[0] != 3.0 || r.relayCache[0] != 3.1 || r.backToBack[0] != 4.0 || r.backToBackCache[0] != 4.1 {
		t.Errorf("read %+v", r)
	}
	// A run without GOMAXPROCS in the names (one CPU) reads the same.
	var one relayResult
	if err := one.add(strings.ReplaceAll(strings.Join(run, "\n"), "-2 ", " ")); err != nil || one.backToBack[0] != 4.0 {
		t.Errorf("read without -2: %+v, %v", one, err)
	}
	// A run that lost a case is an error, not a figure of the rest.
	var short relayResult
	if err := short.add(strings.Join(append(run[:2:2], run[3:]...), "\n")); err == nil || !strings.Contains(err.Error(), "cache=false/settled") {
		t.Errorf("a run without cache=false/settled: %v", err)
	}

	for _, tc := range []struct {
		relay []float64
		want  string
	}{{[]float64{3.2, 3.4, 3.5}, "PASS"}, {[]float64{3.2, 3.6, 3.7}, "FAIL"}} {
		m := &measured{errs: map[string]error{}, relay: &relayResult{direct: []float64{2.4, 2.5, 2.6}, relay: tc.relay, relayCache: tc.relay,
			backToBack: []float64{9, 9, 9}, backToBackCache: []float64{9, 9, 9}}}
		if got := m.relayRow(); got.Result != tc.want {
			t.Errorf("relay %v: %s (%s), want %s", tc.relay, got.Result, got.Median, tc.want)
		}
	}
}
