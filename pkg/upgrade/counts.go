package upgrade

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Counts is a counter by result that goes on across reloads: its values
// are kept beside the metric, handed to the next program, and added back
// there (reloads, Envoy handovers). Counts made before the metric is
// registered are added to it then.
type Counts struct {
	mu     sync.Mutex
	vec    *prometheus.CounterVec
	values map[string]float64
}

// Register makes vec the metric, with the counts so far.
func (c *Counts) Register(vec *prometheus.CounterVec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vec = vec
	for result, n := range c.values {
		vec.WithLabelValues(result).Add(n)
	}
}

// Add counts n of result.
func (c *Counts) Add(result string, n float64) {
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

// Carry adds the previous program's counts.
func (c *Counts) Carry(counts map[string]float64) {
	for result, n := range counts {
		c.Add(result, n)
	}
}

// Snapshot is the counts now, for the next program.
func (c *Counts) Snapshot() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.values)
}
