package upgrade

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Counts go on across reloads: what came before the metric was registered
// and what the previous program handed over are in it, and in what is
// handed to the next.
func TestCountsGoOnAcrossReloads(t *testing.T) {
	var c Counts
	c.Add("refused", 1) // a SIGHUP before run registered the metric
	c.Carry(map[string]float64{"ok": 2, "refused": 1})
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"result"})
	c.Register(vec)
	c.Add("ok", 1)
	if ok, refused := testutil.ToFloat64(vec.WithLabelValues("ok")), testutil.ToFloat64(vec.WithLabelValues("refused")); ok != 3 || refused != 2 {
		t.Errorf("metric ok %v refused %v, want 3 and 2", ok, refused)
	}
	if got := c.Snapshot(); !maps.Equal(got, map[string]float64{"ok": 3, "refused": 2}) {
		t.Errorf("handed over %v", got)
	}
}
