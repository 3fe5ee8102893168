// Package key names zoneproxy's settings: each one's flag, environment
// variable and config-file key come from its constant here. It imports
// nothing of zoneproxy, so that every package (pkg/envoy and pkg/kuma/token
// too, which pkg/config imports) spells a setting through it.
package key

import "strings"

// Key names a setting: flag --<key>, variable ZONEPROXY_<KEY> and key
// <key> of the --config file. Code names a setting by its constant only.
type Key string

// The settings' names; config.Settings declares each one.
const (
	Config                 Key = "config"
	Mesh                   Key = "mesh"
	Role                   Key = "role"
	Name                   Key = "name"
	Workload               Key = "workload"
	Label                  Key = "label"
	Address                Key = "address"
	IngressPort            Key = "ingress-port"
	EgressPort             Key = "egress-port"
	AdminPort              Key = "admin-port"
	CPAddress              Key = "cp-address"
	CACertFile             Key = "ca-cert-file"
	DataplaneTokenFile     Key = "dataplane-token-file"
	DataplaneToken         Key = "dataplane-token"
	EnvoyBinary            Key = "envoy-binary"
	WorkDir                Key = "work-dir"
	ReadinessPort          Key = "readiness-port"
	HealthAddress          Key = "health-address"
	MetricsAddress         Key = "metrics-address"
	DrainTime              Key = "drain-time"
	DrainMin               Key = "drain-min"
	XDSRelay               Key = "xds-relay"
	StateDir               Key = "state-dir"
	CacheMaxAge            Key = "cache-max-age"
	EnvoyLogLevel          Key = "envoy-log-level"
	EnvoyComponentLogLevel Key = "envoy-component-log-level"
	Concurrency            Key = "concurrency"
	EnvoyArg               Key = "envoy-arg"
	RetryInitial           Key = "retry-initial"
	RetryMax               Key = "retry-max"
	BootstrapTimeout       Key = "bootstrap-timeout"
	LogLevel               Key = "log-level"
	LogFormat              Key = "log-format"
	Zone                   Key = "zone"
	AdvertisedAddress      Key = "advertised-address"
	AdvertisedPort         Key = "advertised-port"
)

// EnvPrefix starts every environment variable zoneproxy reads.
const EnvPrefix = "ZONEPROXY_"

// Flag is the setting as a flag, e.g. --drain-time.
func (k Key) Flag() string { return "--" + string(k) }

// Env is the setting's environment variable, e.g. ZONEPROXY_DRAIN_TIME.
func (k Key) Env() string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(string(k), "-", "_"))
}
