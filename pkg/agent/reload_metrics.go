package agent

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// monotonicUsec is CLOCK_MONOTONIC in µs, which RELOADING=1 carries.
func monotonicUsec() int64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return int64(f * 1e6)
}

func (a *Agent) now() time.Time { return time.Now() }

// registerReloadMetrics adds zoneproxy_reloads_total and the generations
// to /metrics.
func (a *Agent) registerReloadMetrics() {
	r := &a.rl
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zoneproxy_reloads_total",
		Help: "Reloads of the agent in place (zoneproxy reload, systemctl reload), by result: ok (the new program serves), refused (not now, or the new binary or configuration cannot take over), failed (the replacement failed; the agent served on).",
	}, []string{"result"})
	for _, res := range []string{upgrade.ResultOK, upgrade.ResultRefused, upgrade.ResultFailed} {
		reloads.WithLabelValues(res)
	}
	generations := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "zoneproxy_generation",
		Help: "Generation of the agent's program (1 at start, one more at each reload) and of Envoy (one more at each Envoy started in place).",
	}, []string{"process"})
	a.opts.Metrics.Register(reloads)
	a.opts.Metrics.Register(generations)
	r.reloads.Register(reloads) // with refusals before it was registered
	r.hmu.Lock()
	r.generations = generations
	r.hmu.Unlock()
	a.generationGauge()
}

func (a *Agent) generationGauge() {
	r := &a.rl
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.generations == nil {
		return
	}
	r.generations.WithLabelValues("agent").Set(float64(r.generation))
	r.generations.WithLabelValues("envoy").Set(float64(r.envoyGeneration))
}

// Generations says the agent's and Envoy's generation, for /ready and
// STATUS= after a reload; "" before any reload.
func (a *Agent) Generations() string {
	r := &a.rl
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.generation <= 1 {
		return ""
	}
	return fmt.Sprintf("agent generation %d, Envoy generation %d", r.generation, r.envoyGeneration)
}

// reloadStatus is the last reload, nil if none.
func (a *Agent) reloadStatus() *ReloadStatus {
	r := &a.rl
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.last
}

// generations are the agent's and Envoy's generations and the last
// reload, for /status.
func (a *Agent) generations() (int, int, *ReloadStatus) {
	r := &a.rl
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.generation, r.envoyGeneration, r.last
}

// startedWords is the log message of an Envoy started or adopted.
func (a *Agent) startedWords() string {
	if a.rl.taken.AdoptsEnvoy() {
		return "supervising the running Envoy"
	}
	return "started Envoy"
}
