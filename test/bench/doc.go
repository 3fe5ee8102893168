// Package bench holds zoneproxy's benchmarks: cmd/zpbench measures the
// agent as a process against the targets (make bench), and the Go
// benchmarks here time the start-up path against the test control plane
// and a MeshMetric scrape, pure and through the sockets. EnvoyStats
// generates the Envoy /stats body both use.
package bench
