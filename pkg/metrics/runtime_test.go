package metrics

import (
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// The standard process and Go series a fleet's dashboards expect (those
// this page always served, and go_gc_duration_seconds, which stock Go
// dashboards read), with values that describe this process.
func TestProcessAndGoMetrics(t *testing.T) {
	runtime.GC() // one cycle at least, for the GC series
	got := parse(t, scrape(t, New(state.NewTracker())))
	value := func(name string) float64 {
		m := got[name].GetMetric()[0]
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	now := float64(time.Now().Unix())
	cases := []struct {
		name string
		typ  dto.MetricType
		ok   func(v float64) bool
	}{
		{"process_cpu_seconds_total", dto.MetricType_COUNTER, func(v float64) bool { return v >= 0 }},
		{"process_resident_memory_bytes", dto.MetricType_GAUGE, func(v float64) bool { return v > 1<<20 }},
		{"process_virtual_memory_bytes", dto.MetricType_GAUGE, func(v float64) bool { return v >= value("process_resident_memory_bytes") }},
		{"process_open_fds", dto.MetricType_GAUGE, func(v float64) bool { return v >= 3 && v <= value("process_max_fds") }},
		{"process_max_fds", dto.MetricType_GAUGE, func(v float64) bool { return v >= 3 }},
		{"process_start_time_seconds", dto.MetricType_GAUGE, func(v float64) bool { return v > now-24*3600 && v <= now+1 }},
		{"go_goroutines", dto.MetricType_GAUGE, func(v float64) bool { return v >= 1 }},
		{"go_threads", dto.MetricType_GAUGE, func(v float64) bool { return v >= 1 }},
		{"go_sched_gomaxprocs_threads", dto.MetricType_GAUGE, func(v float64) bool { return v == float64(runtime.GOMAXPROCS(0)) }},
		{"go_memstats_heap_alloc_bytes", dto.MetricType_GAUGE, func(v float64) bool { return v > 0 }},
		{"go_memstats_alloc_bytes_total", dto.MetricType_COUNTER, func(v float64) bool { return v >= value("go_memstats_heap_alloc_bytes") }},
		{"go_memstats_heap_objects", dto.MetricType_GAUGE, func(v float64) bool { return v > 0 }},
		{"go_memstats_next_gc_bytes", dto.MetricType_GAUGE, func(v float64) bool { return v > 0 }},
		{"go_memstats_sys_bytes", dto.MetricType_GAUGE, func(v float64) bool { return v >= value("go_memstats_heap_alloc_bytes") }},
		{"go_gc_cycles_total", dto.MetricType_COUNTER, func(v float64) bool { return v >= 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := got[tc.name]
			if !ok || len(f.GetMetric()) != 1 {
				t.Fatalf("not on the page as one sample: %v", f)
			}
			if f.GetType() != tc.typ || f.GetHelp() == "" {
				t.Errorf("type %s, help %q; want %s with help", f.GetType(), f.GetHelp(), tc.typ)
			}
			if v := value(tc.name); !tc.ok(v) {
				t.Errorf("implausible value %v", v)
			}
		})
	}
	gc := got["go_gc_duration_seconds"]
	if gc.GetType() != dto.MetricType_SUMMARY || len(gc.GetMetric()) != 1 {
		t.Fatalf("go_gc_duration_seconds is not one summary: %v", gc)
	}
	// Two names for one count: the cycles this page always counted and the
	// summary's, which stock dashboards read. A cycle may end in between.
	if n, cycles := float64(gc.GetMetric()[0].GetSummary().GetSampleCount()), value("go_gc_cycles_total"); n < 1 || n > cycles+1 || n < cycles-1 {
		t.Errorf("go_gc_duration_seconds_count %v, go_gc_cycles_total %v", n, cycles)
	}
	info := got["go_info"].GetMetric()
	if len(info) != 1 || len(info[0].GetLabel()) != 1 || info[0].GetLabel()[0].GetValue() != runtime.Version() {
		t.Errorf("go_info does not name %s: %v", runtime.Version(), info)
	}
}

// The CPU time on the page is this process's, in seconds, as getrusage
// counts it too.
func TestProcessCPUMatchesTheKernel(t *testing.T) {
	usage := func() (user, system float64) {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds()
	}
	cpu := func() float64 { u, s := usage(); return u + s }
	// Spend 0.2 s of each kind, so that a wrong unit, or one kind left
	// out, shows: user time in arithmetic, system time in system calls.
	deadline := time.Now().Add(time.Minute)
	x := uint64(1)
	for u, _ := usage(); u < 0.2 && time.Now().Before(deadline); u, _ = usage() {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	for _, sys := usage(); sys < 0.2 && time.Now().Before(deadline); _, sys = usage() {
	}
	if x == 0 {
		t.Log(x) // keeps the arithmetic
	}
	m := New(state.NewTracker())
	before := cpu()
	page := scrape(t, m)
	after := cpu()
	f := parse(t, page)["process_cpu_seconds_total"]
	if f == nil {
		t.Fatalf("no process_cpu_seconds_total:\n%s", page)
	}
	// /proc counts in ticks of 10ms; allow for them.
	if v := f.GetMetric()[0].GetCounter().GetValue(); v < before-0.1 || v > after+0.1 {
		t.Errorf("process_cpu_seconds_total %v, getrusage says %v to %v", v, before, after)
	}
	if strings.Contains(page, "process_cpu_seconds_total 0\n") {
		t.Error("no CPU time counted")
	}
}
