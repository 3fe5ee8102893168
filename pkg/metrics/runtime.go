package metrics

import (
	"runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// runtimeCollectors are the agent process's standard process_* and go_*
// series, as every Go program instrumented with the Prometheus client
// serves them (go_gc_duration_seconds and go_memstats_* included, read from
// runtime/metrics without stopping the world), and go_gc_cycles_total,
// which this page served before and which go_gc_duration_seconds_count
// also counts.
func runtimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "go_gc_cycles_total", Help: "Count of completed GC cycles.",
		}, func() float64 {
			s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
			metrics.Read(s)
			return float64(s[0].Value.Uint64())
		}),
	}
}
