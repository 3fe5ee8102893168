package accesslog

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zoneproxy/zoneproxy/pkg/metrics"
)

// The streamer's metrics, read from its counters at each scrape: a backend
// forgotten after IdleTimeout takes its series with it.
var (
	linesReadDesc = prometheus.NewDesc("zoneproxy_accesslog_lines_read_total",
		"Lines read from the access-log FIFO.", nil, nil)
	linesForwardedDesc = prometheus.NewDesc("zoneproxy_accesslog_lines_forwarded_total",
		"Lines written to an access-log backend.", []string{"backend"}, nil)
	linesDroppedDesc = prometheus.NewDesc("zoneproxy_accesslog_lines_dropped_total",
		`Lines dropped, by backend ("" when the line could not be parsed or its backend was closed as idle) and reason.`,
		[]string{"backend", "reason"}, nil)
	backendConnectedDesc = prometheus.NewDesc("zoneproxy_accesslog_backend_connected",
		"1 while a connection to the access-log backend is open.", []string{"backend"}, nil)
)

// Metrics returns the streamer's metrics, for the agent's registry
// (metrics.Metrics.Register).
func (s *Streamer) Metrics() prometheus.Collector { return streamerMetrics{s} }

type streamerMetrics struct{ s *Streamer }

func (streamerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- linesReadDesc
	ch <- linesForwardedDesc
	ch <- linesDroppedDesc
	ch <- backendConnectedDesc
}

func (c streamerMetrics) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	backends := make([]*backend, 0, len(s.backends))
	for _, b := range s.backends {
		backends = append(backends, b)
	}
	s.mu.Unlock()

	counter := func(d *prometheus.Desc, n uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n), labels...)
	}
	counter(linesReadDesc, s.read.Load())
	counter(linesDroppedDesc, s.invalid.Load(), "", "invalid")
	counter(linesDroppedDesc, s.tooLong.Load(), "", "too_long")
	// A retired backend's own series are gone, so its last drops live here.
	counter(linesDroppedDesc, s.idle.Load(), "", "idle")
	for _, b := range backends {
		addr := metrics.LabelValue(b.addr)
		counter(linesForwardedDesc, b.forwarded.Load(), addr)
		counter(linesDroppedDesc, b.queueFull.Load(), addr, "queue_full")
		counter(linesDroppedDesc, b.writeFailed.Load(), addr, "write_failed")
		up := 0.0
		if b.connected.Load() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(backendConnectedDesc, prometheus.GaugeValue, up, addr)
	}
}
