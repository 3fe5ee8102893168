package upgrade

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Record is the agent's generations and reloads: its program's
// generation (1 at start, one more at each reload), Envoy's (one more at
// each Envoy started in place), the reloads by result and the last one.
// It goes on across reloads through State.
type Record struct {
	mu              sync.Mutex
	generation      int
	envoyGeneration int
	gauge           *prometheus.GaugeVec
	last            *ReloadStatus
	reloads         Counts // zoneproxy_reloads_total
}

// Register adds zoneproxy_reloads_total and the generations to /metrics,
// with what was counted before.
func (r *Record) Register(register func(prometheus.Collector)) {
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zoneproxy_reloads_total",
		Help: "Reloads of the agent in place (zoneproxy reload, systemctl reload), by result: ok (the new program serves), refused (not now, or the new binary or configuration cannot take over), failed (the replacement failed; the agent served on).",
	}, []string{"result"})
	for _, res := range []string{ResultOK, ResultRefused, ResultFailed} {
		reloads.WithLabelValues(res)
	}
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "zoneproxy_generation",
		Help: "Generation of the agent's program (1 at start, one more at each reload) and of Envoy (one more at each Envoy started in place).",
	}, []string{"process"})
	register(reloads)
	register(gauge)
	r.reloads.Register(reloads) // with refusals before it was registered
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gauge = gauge
	r.setGauge()
}

// setGauge needs mu.
func (r *Record) setGauge() {
	if r.gauge == nil {
		return
	}
	r.gauge.WithLabelValues("agent").Set(float64(r.generation))
	r.gauge.WithLabelValues("envoy").Set(float64(r.envoyGeneration))
}

// Started is a fresh start: generation 1.
func (r *Record) Started() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.generation = 1
	r.setGauge()
}

// Reloaded is a reload that brought this program in: it goes on from
// the previous program's record.
func (r *Record) Reloaded(st *State, at time.Time) {
	r.reloads.Carry(st.Reloads)
	r.reloads.Add(ResultOK, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.generation, r.envoyGeneration = st.Generation+1, st.EnvoyGeneration
	r.last = &ReloadStatus{Result: ResultOK, At: at}
	r.setGauge()
}

// EnvoyStarted counts an Envoy started in place.
func (r *Record) EnvoyStarted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.envoyGeneration++
	r.setGauge()
}

// Ended records a reload that did not happen (result refused or failed).
func (r *Record) Ended(result string, err error, at time.Time) {
	r.reloads.Add(result, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = &ReloadStatus{Result: result, Error: err.Error(), At: at}
}

// Generations are the agent's and Envoy's generations and the last
// reload, nil if none.
func (r *Record) Generations() (agent, envoy int, last *ReloadStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.generation, r.envoyGeneration, r.last
}

// Generation is the agent's program's.
func (r *Record) Generation() int {
	g, _, _ := r.Generations()
	return g
}

// Words say the agent's and Envoy's generation, for /ready and STATUS=
// after a reload; "" before any reload.
func (r *Record) Words() string {
	g, eg, _ := r.Generations()
	if g <= 1 {
		return ""
	}
	return fmt.Sprintf("agent generation %d, Envoy generation %d", g, eg)
}

// Reloads are the reloads by result, for the next program.
func (r *Record) Reloads() map[string]float64 { return r.reloads.Snapshot() }
