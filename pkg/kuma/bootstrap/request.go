// Package bootstrap is the client of the control plane's /bootstrap
// endpoint: it builds the request, classifies each answer into a small set
// of outcomes, and retries the retryable ones with jittered backoff.
// It knows nothing about Envoy processes.
package bootstrap

// Request is the JSON body of POST /bootstrap, field for field as the
// control plane decodes it.
type Request struct {
	Mesh               string            `json:"mesh"`
	Name               string            `json:"name"`
	ProxyType          string            `json:"proxyType"`
	DataplaneToken     string            `json:"dataplaneToken,omitempty"`
	DataplaneTokenPath string            `json:"dataplaneTokenPath,omitempty"`
	DataplaneResource  string            `json:"dataplaneResource,omitempty"`
	Version            Version           `json:"version"`
	CACert             string            `json:"caCert"`
	DynamicMetadata    map[string]string `json:"dynamicMetadata"`
	ReadinessPort      uint32            `json:"readinessPort,omitempty"`
	OperatingSystem    string            `json:"operatingSystem"`
	Features           []string          `json:"features"`
	Resources          Resources         `json:"resources"`
	Workdir            string            `json:"workdir"`
	MetricsResources   MetricsResources  `json:"metricsResources"`
	SystemCAPath       string            `json:"systemCaPath"`
	IPv6Enabled        bool              `json:"ipv6Enabled"`
}

// Version describes the agent and Envoy to the control plane.
type Version struct {
	KumaDp KumaDpVersion `json:"kumaDp"`
	Envoy  EnvoyVersion  `json:"envoy"`
}

// KumaDpVersion is the agent's build; the control plane shows it in insights.
type KumaDpVersion struct {
	Version   string `json:"version"`
	GitTag    string `json:"gitTag"`
	GitCommit string `json:"gitCommit"`
	BuildDate string `json:"buildDate"`
}

// EnvoyVersion comes from `envoy --version`.
type EnvoyVersion struct {
	Version          string `json:"version"`
	Build            string `json:"build"`
	KumaDpCompatible bool   `json:"kumaDpCompatible"`
}

// Resources is accepted and ignored by the control plane; sent for parity.
type Resources struct {
	MaxHeapSizeBytes uint64 `json:"maxHeapSizeBytes"`
}

// MetricsResources names a TLS pair for Envoy's metrics; unused here.
type MetricsResources struct {
	CertPath string `json:"certPath"`
	KeyPath  string `json:"keyPath"`
}

// FeatureTCPAccessLogViaNamedPipe says the agent streams the access-log
// FIFO to MeshAccessLog TCP backends. kuma-cp no longer reads it (it always
// points them at the FIFO); sent as kuma-dp does.
const FeatureTCPAccessLogViaNamedPipe = "feature-tcp-accesslog-via-named-pipe"

// FeatureReusePort lets the control plane enable SO_REUSEPORT on listeners.
// The agent advertises only features it (or Envoy alone) really provides:
// no OTel pipe or DNS proxy.
const FeatureReusePort = "feature-reuse-port"
