package metrics

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"syscall"
)

// The standard process_* and go_* series, under the names the Prometheus
// client library gives them, read from /proc and runtime/metrics: the
// library itself would cost megabytes of binary, these a few kilobytes.

// userHZ is the kernel's clock tick for /proc/*/stat times: 100 on every
// Linux architecture Go supports (the Prometheus client assumes it too).
const userHZ = 100

// WriteProcess writes the agent process's CPU, memory, file descriptors and
// start time. A series whose source cannot be read is left out.
func WriteProcess(w io.Writer) {
	stat, err := readProcStat()
	if err == nil {
		counter(w, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", float64(stat.utime+stat.stime)/userHZ)
		gauge(w, "process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(stat.vsize))
		gauge(w, "process_resident_memory_bytes", "Resident memory size in bytes.", float64(stat.rss*int64(os.Getpagesize())))
		if boot, err := bootTime(); err == nil {
			gauge(w, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", float64(boot)+float64(stat.starttime)/userHZ)
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		gauge(w, "process_open_fds", "Number of open file descriptors.", float64(len(fds)))
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		gauge(w, "process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
}

// goSamples are read in one runtime/metrics call, without stopping the
// world as runtime.ReadMemStats would.
var goSamples = []struct{ runtime, name, typ, help string }{
	{"/sched/goroutines:goroutines", "go_goroutines", "gauge", "Number of goroutines that currently exist."},
	{"/sched/gomaxprocs:threads", "go_sched_gomaxprocs_threads", "gauge", "The current runtime.GOMAXPROCS setting."},
	{"/memory/classes/heap/objects:bytes", "go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use."},
	{"/gc/heap/allocs:bytes", "go_memstats_alloc_bytes_total", "counter", "Total number of bytes allocated in heap until now."},
	{"/gc/heap/objects:objects", "go_memstats_heap_objects", "gauge", "Number of currently allocated objects."},
	{"/gc/heap/goal:bytes", "go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place."},
	{"/memory/classes/total:bytes", "go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system."},
	{"/gc/cycles/total:gc-cycles", "go_gc_cycles_total", "counter", "Count of completed GC cycles."},
}

// WriteGo writes the Go runtime's goroutines, threads and memory.
func WriteGo(w io.Writer) {
	fmt.Fprintf(w, "# HELP go_info Information about the Go environment.\n# TYPE go_info gauge\ngo_info{version=\"%s\"} 1\n", LabelValue(runtime.Version()))
	samples := make([]rtmetrics.Sample, len(goSamples))
	for i, s := range goSamples {
		samples[i].Name = s.runtime
	}
	rtmetrics.Read(samples)
	for i, s := range goSamples {
		var v float64
		switch samples[i].Value.Kind() {
		case rtmetrics.KindUint64:
			v = float64(samples[i].Value.Uint64())
		case rtmetrics.KindFloat64:
			v = samples[i].Value.Float64()
		default:
			continue // not in this Go release
		}
		family(w, s.name, s.typ, s.help, v)
	}
	threads, _ := runtime.ThreadCreateProfile(nil)
	gauge(w, "go_threads", "Number of OS threads created.", float64(threads))
}

type procStat struct {
	utime, stime, starttime uint64
	vsize                   uint64
	rss                     int64
}

func readProcStat() (procStat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// parseProcStat reads the fields after the command name, which may itself
// hold spaces and parentheses.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/self/stat: no command name")
	}
	// Fields from the 3rd (state) on; utime is the 14th, so index 11.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return procStat{}, fmt.Errorf("/proc/self/stat: %d fields", len(f)+2)
	}
	var s procStat
	var errs [5]error
	s.utime, errs[0] = strconv.ParseUint(f[11], 10, 64)
	s.stime, errs[1] = strconv.ParseUint(f[12], 10, 64)
	s.starttime, errs[2] = strconv.ParseUint(f[19], 10, 64)
	s.vsize, errs[3] = strconv.ParseUint(f[20], 10, 64)
	s.rss, errs[4] = strconv.ParseInt(f[21], 10, 64)
	for _, err := range errs {
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/self/stat: %w", err)
		}
	}
	return s, nil
}

// bootTime is the btime line of /proc/stat: when the host booted, in
// seconds since the epoch.
func bootTime() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/stat: no btime")
}

func family(w io.Writer, name, typ, help string, v float64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, typ, name, strconv.FormatFloat(v, 'g', -1, 64))
}

func gauge(w io.Writer, name, help string, v float64)   { family(w, name, "gauge", help, v) }
func counter(w io.Writer, name, help string, v float64) { family(w, name, "counter", help, v) }
