package accesslog

import (
	"fmt"
	"io"
	"sort"

	"github.com/zoneproxy/zoneproxy/pkg/metrics"
)

// WriteMetrics writes the streamer's counters in Prometheus text format 0.0.4.
func (s *Streamer) WriteMetrics(w io.Writer) {
	s.mu.Lock()
	backends := make([]*backend, 0, len(s.backends))
	for _, b := range s.backends {
		backends = append(backends, b)
	}
	s.mu.Unlock()
	sort.Slice(backends, func(i, j int) bool { return backends[i].addr < backends[j].addr })

	family := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	family("zoneproxy_accesslog_lines_read_total", "counter", "Lines read from the access-log FIFO.")
	fmt.Fprintf(w, "zoneproxy_accesslog_lines_read_total %d\n", s.read.Load())

	family("zoneproxy_accesslog_lines_forwarded_total", "counter", "Lines written to an access-log backend.")
	for _, b := range backends {
		fmt.Fprintf(w, "zoneproxy_accesslog_lines_forwarded_total{backend=\"%s\"} %d\n", metrics.LabelValue(b.addr), b.forwarded.Load())
	}

	family("zoneproxy_accesslog_lines_dropped_total", "counter", `Lines dropped, by backend ("" when the line could not be parsed or its backend was closed as idle) and reason.`)
	dropped := func(backend, reason string, n uint64) {
		fmt.Fprintf(w, "zoneproxy_accesslog_lines_dropped_total{backend=\"%s\",reason=\"%s\"} %d\n", metrics.LabelValue(backend), reason, n)
	}
	dropped("", "invalid", s.invalid.Load())
	dropped("", "too_long", s.tooLong.Load())
	// A retired backend's own series are gone, so its last drops live here.
	dropped("", "idle", s.idle.Load())
	for _, b := range backends {
		dropped(b.addr, "queue_full", b.queueFull.Load())
		dropped(b.addr, "write_failed", b.writeFailed.Load())
	}

	family("zoneproxy_accesslog_backend_connected", "gauge", "1 while a connection to the access-log backend is open.")
	for _, b := range backends {
		up := 0
		if b.connected.Load() {
			up = 1
		}
		fmt.Fprintf(w, "zoneproxy_accesslog_backend_connected{backend=\"%s\"} %d\n", metrics.LabelValue(b.addr), up)
	}
}
