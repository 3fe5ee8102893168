package agent

import (
	"os"
	"strconv"
	"strings"
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

// Generations says the agent's and Envoy's generation, for /ready and
// STATUS= after a reload; "" before any reload.
func (a *Agent) Generations() string { return a.rl.record.Words() }
