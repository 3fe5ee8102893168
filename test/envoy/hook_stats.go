package main

import (
	"fmt"
	"os"
)

// statsFileBody is the content of ENVOY_STANDIN_STATS_FILE, read once at
// start; nil when the hook is unset. With it, /stats?format=prometheus
// (and /stats/prometheus) answers that content, whatever the rest of the
// query, so that a benchmark can give Envoy tens of thousands of stats.
var statsFileBody *string

func loadStatsFileHook() error {
	path := os.Getenv("ENVOY_STANDIN_STATS_FILE")
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("envoy stand-in: bad ENVOY_STANDIN_STATS_FILE: %v", err)
	}
	s := string(b)
	statsFileBody = &s
	return nil
}
