package agent

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// carriedCounts is a counter by result that goes on across reloads: its
// values are kept beside the metric, handed to the next program, and
// added back there (reloads, Envoy handovers). Counts made before the
// metric is registered are added to it then.
type carriedCounts struct {
	mu     sync.Mutex
	vec    *prometheus.CounterVec
	values map[string]float64
}

// register makes vec the metric, with the counts so far.
func (c *carriedCounts) register(vec *prometheus.CounterVec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vec = vec
	for result, n := range c.values {
		vec.WithLabelValues(result).Add(n)
	}
}

// add counts n of result.
func (c *carriedCounts) add(result string, n float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.values == nil {
		c.values = map[string]float64{}
	}
	c.values[result] += n
	if c.vec != nil {
		c.vec.WithLabelValues(result).Add(n)
	}
}

// carry adds the previous program's counts.
func (c *carriedCounts) carry(counts map[string]float64) {
	for result, n := range counts {
		c.add(result, n)
	}
}

// snapshot is the counts now, for the next program.
func (c *carriedCounts) snapshot() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.values)
}
