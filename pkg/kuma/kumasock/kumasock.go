// Package kumasock names the Unix sockets and FIFOs that the control plane
// points Envoy at inside the work dir. The rule is kuma-cp's own
// (pkg/core/xds/sockets.go): the path is truncated, not hashed, so the
// agent must compute exactly the same name to meet Envoy there.
package kumasock

import "path/filepath"

// maxPrefix is how much of workdir/base kuma-cp keeps before ".sock".
const maxPrefix = 98

func path(workDir, base string) string {
	p := filepath.Join(workDir, base)
	if workDir == "" {
		p = base
	}
	if len(p) > maxPrefix {
		p = p[:maxPrefix]
	}
	return p + ".sock"
}

// AccessLog is the FIFO Envoy writes TCP access-log lines into.
func AccessLog(workDir, name, mesh string) string {
	return path(workDir, "kuma-al-"+name+"-"+mesh)
}

// MetricsHijacker is where Envoy forwards MeshMetric Prometheus scrapes.
func MetricsHijacker(workDir, name, mesh string) string {
	return path(workDir, "kuma-mh-"+name+"-"+mesh)
}

// DynamicConfig is Envoy's listener serving /meshmetric and /otel.
func DynamicConfig(workDir string) string {
	return path(workDir, "kuma-mesh-metric-config")
}

// OTel is the OTLP socket of one MeshOpenTelemetryBackend.
func OTel(workDir, backend string) string {
	return path(workDir, "kuma-otel-"+backend)
}
