package metrics

import (
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/meshmetric"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// The standard process and Go series a fleet's dashboards expect, with
// values that describe this process.
func TestProcessAndGoMetrics(t *testing.T) {
	fams, err := meshmetric.ParseText(scrape(t, New(state.NewTracker())))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]meshmetric.Family{}
	for _, f := range fams {
		got[f.Name] = f
	}
	value := func(name string) float64 { return got[name].Samples[0].Value }
	now := float64(time.Now().Unix())
	cases := []struct {
		name string
		typ  meshmetric.Type
		ok   func(v float64) bool
	}{
		{"process_cpu_seconds_total", meshmetric.Counter, func(v float64) bool { return v >= 0 }},
		{"process_resident_memory_bytes", meshmetric.Gauge, func(v float64) bool { return v > 1<<20 }},
		{"process_virtual_memory_bytes", meshmetric.Gauge, func(v float64) bool { return v >= value("process_resident_memory_bytes") }},
		{"process_open_fds", meshmetric.Gauge, func(v float64) bool { return v >= 3 && v <= value("process_max_fds") }},
		{"process_max_fds", meshmetric.Gauge, func(v float64) bool { return v >= 3 }},
		{"process_start_time_seconds", meshmetric.Gauge, func(v float64) bool { return v > now-24*3600 && v <= now+1 }},
		{"go_goroutines", meshmetric.Gauge, func(v float64) bool { return v >= 1 }},
		{"go_threads", meshmetric.Gauge, func(v float64) bool { return v >= 1 }},
		{"go_sched_gomaxprocs_threads", meshmetric.Gauge, func(v float64) bool { return v == float64(runtime.GOMAXPROCS(0)) }},
		{"go_memstats_heap_alloc_bytes", meshmetric.Gauge, func(v float64) bool { return v > 0 }},
		{"go_memstats_alloc_bytes_total", meshmetric.Counter, func(v float64) bool { return v >= value("go_memstats_heap_alloc_bytes") }},
		{"go_memstats_heap_objects", meshmetric.Gauge, func(v float64) bool { return v > 0 }},
		{"go_memstats_next_gc_bytes", meshmetric.Gauge, func(v float64) bool { return v > 0 }},
		{"go_memstats_sys_bytes", meshmetric.Gauge, func(v float64) bool { return v >= value("go_memstats_heap_alloc_bytes") }},
		{"go_gc_cycles_total", meshmetric.Counter, func(v float64) bool { return v >= 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := got[tc.name]
			if !ok || len(f.Samples) != 1 {
				t.Fatalf("not on the page as one sample: %+v", f)
			}
			if f.Type != tc.typ || f.Help == "" {
				t.Errorf("type %s, help %q; want %s with help", f.Type, f.Help, tc.typ)
			}
			if v := f.Samples[0].Value; !tc.ok(v) {
				t.Errorf("implausible value %v", v)
			}
		})
	}
	if info := got["go_info"]; len(info.Samples) != 1 || !hasLabel(fams, "go_info", "version", runtime.Version()) {
		t.Errorf("go_info does not name %s: %+v", runtime.Version(), info)
	}
}

// The command name sits in parentheses and may hold spaces and
// parentheses of its own; the fields after it are read by position.
func TestParseProcStat(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 4 0 4200 123456789 2048 18446744073709551615"
	cases := []struct {
		name, stat string
		want       procStat
		wantErr    bool
	}{
		{"plain", "42 (zoneproxy)" + tail, procStat{utime: 250, stime: 50, starttime: 4200, vsize: 123456789, rss: 2048}, false},
		{"spaces and parentheses in the name", "42 (zone proxy) (x))" + tail, procStat{utime: 250, stime: 50, starttime: 4200, vsize: 123456789, rss: 2048}, false},
		{"truncated", "42 (zoneproxy) S 1 2 3", procStat{}, true},
		{"no name", "42 zoneproxy" + tail, procStat{}, true},
		{"not a number", "42 (zoneproxy)" + strings.Replace(tail, " 250 ", " x ", 1), procStat{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tc.stat + "\n"))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
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
	before := cpu()
	var page strings.Builder
	WriteProcess(&page)
	after := cpu()
	fams, err := meshmetric.ParseText(page.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.Name == "process_cpu_seconds_total" {
			// /proc counts in ticks of 10ms; allow for them.
			if v := f.Samples[0].Value; v < before-0.1 || v > after+0.1 {
				t.Errorf("process_cpu_seconds_total %v, getrusage says %v to %v", v, before, after)
			}
			return
		}
	}
	t.Error("no process_cpu_seconds_total")
}
