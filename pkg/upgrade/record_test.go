package upgrade

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The generations and the reloads go on across reloads: /status, /ready,
// STATUS= and /metrics say them, and the next program is handed them.
func TestTheRecordGoesOnAcrossReloads(t *testing.T) {
	at := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	refused := errors.New("reload refused: the agent is stopping")
	reg := prometheus.NewRegistry()
	register := func(c prometheus.Collector) { reg.MustRegister(c) }
	for _, tc := range []struct {
		name               string
		run                func(r *Record)
		generation, envoy  int
		words              string
		last               *ReloadStatus
		ok, refusedReloads float64
	}{
		{"a fresh start", func(r *Record) { r.Started(); r.Register(register); r.EnvoyStarted() }, 1, 1, "", nil, 0, 0},
		{"a refusal before the metric", func(r *Record) { r.Ended(ResultRefused, refused, at); r.Started(); r.Register(register) },
			1, 0, "", &ReloadStatus{Result: ResultRefused, Error: refused.Error(), At: at}, 0, 1},
		{"brought in by a reload", func(r *Record) {
			r.Started()
			r.Register(register)
			r.Reloaded(&State{Generation: 2, EnvoyGeneration: 3, Reloads: map[string]float64{ResultOK: 1, ResultRefused: 4}}, at)
		}, 3, 3, "agent generation 3, Envoy generation 3", &ReloadStatus{Result: ResultOK, At: at}, 2, 4},
		{"an Envoy restarted after a reload", func(r *Record) {
			r.Started()
			r.Register(register)
			r.Reloaded(&State{Generation: 1, EnvoyGeneration: 1}, at)
			r.EnvoyStarted()
		}, 2, 2, "agent generation 2, Envoy generation 2", &ReloadStatus{Result: ResultOK, At: at}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg = prometheus.NewRegistry()
			var r Record
			tc.run(&r)
			g, eg, last := r.Generations()
			if g != tc.generation || eg != tc.envoy || r.Words() != tc.words || (last == nil) != (tc.last == nil) || (last != nil && *last != *tc.last) {
				t.Fatalf("generations %d, %d, %q, last %+v; want %d, %d, %q, %+v", g, eg, r.Words(), last, tc.generation, tc.envoy, tc.words, tc.last)
			}
			if a, e := testutil.ToFloat64(r.gauge.WithLabelValues("agent")), testutil.ToFloat64(r.gauge.WithLabelValues("envoy")); a != float64(g) || e != float64(eg) {
				t.Fatalf("/metrics says generations %v and %v", a, e)
			}
			if got := r.Reloads(); got[ResultOK] != tc.ok || got[ResultRefused] != tc.refusedReloads {
				t.Fatalf("reloads handed over %v", got)
			}
		})
	}
}
