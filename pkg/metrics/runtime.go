package metrics

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// The standard process_* and go_* series, under the names the Prometheus
// client library gives them, read from /proc and the runtime: the
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

// WriteGo writes the Go runtime's goroutines, threads and memory. The
// memory comes from runtime.ReadMemStats, which stops the world for some
// microseconds per scrape; runtime/metrics would not, but linking it costs
// every start about 0.1 ms of package initialisation.
func WriteGo(w io.Writer) {
	fmt.Fprintf(w, "# HELP go_info Information about the Go environment.\n# TYPE go_info gauge\ngo_info{version=\"%s\"} 1\n", LabelValue(runtime.Version()))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, s := range []struct {
		name, typ, help string
		v               float64
	}{
		{"go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())},
		{"go_sched_gomaxprocs_threads", "gauge", "The current runtime.GOMAXPROCS setting.", float64(runtime.GOMAXPROCS(0))},
		{"go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", float64(ms.HeapAlloc)},
		{"go_memstats_alloc_bytes_total", "counter", "Total number of bytes allocated in heap until now.", float64(ms.TotalAlloc)},
		{"go_memstats_heap_objects", "gauge", "Number of currently allocated objects.", float64(ms.HeapObjects)},
		{"go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place.", float64(ms.NextGC)},
		{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system.", float64(ms.Sys)},
		{"go_gc_cycles_total", "counter", "Count of completed GC cycles.", float64(ms.NumGC)},
	} {
		family(w, s.name, s.typ, s.help, s.v)
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
