// Package config defines the agent's configuration, its defaults, and the
// validation that reports every problem at once.
package config

import (
	"net"
	"regexp"
	"strconv"
	"time"
)

// Role says which zone proxy listeners this agent runs.
type Role string

const (
	RoleIngress  Role = "ingress"
	RoleEgress   Role = "egress"
	RoleCombined Role = "combined"
)

// HasIngress reports whether the role carries a ZoneIngress listener.
func (r Role) HasIngress() bool { return r == RoleIngress || r == RoleCombined }

// HasEgress reports whether the role carries a ZoneEgress listener.
func (r Role) HasEgress() bool { return r == RoleEgress || r == RoleCombined }

// Known reports whether r is one of the roles.
func (r Role) Known() bool { return r == RoleIngress || r == RoleEgress || r == RoleCombined }

// Config is everything `zoneproxy run` needs. Each setting among its
// fields is declared once, in declarations.go: its flag, variable, key,
// help, default and what a reload does with it.
type Config struct {
	Mesh     string
	Role     Role
	Name     string
	Workload string
	Labels   map[string]string
	// derivedName and derivedWorkload: Complete made them from the mesh
	// and role, so a mistyped role made them too.
	derivedName, derivedWorkload bool

	Address string
	// AddressChosen says why Address is what it is when it was not given
	// (e.g. the interface of the default route); "" when it was.
	AddressChosen string
	IngressPort   int
	EgressPort    int
	AdminPort     int

	CPAddress          string
	CACertFile         string
	DataplaneTokenFile string
	DataplaneToken     string

	EnvoyBinary   string
	WorkDir       string
	ReadinessPort int
	DrainTime     time.Duration
	DrainMin      time.Duration

	// XDSRelay puts the agent between Envoy and the control plane.
	XDSRelay bool
	// StateDir keeps the last-known-good configuration; "" disables it.
	// StateDirSet says it was given (an explicit "" too), not derived.
	StateDir    string
	StateDirSet bool
	// CacheMaxAge is the oldest cached configuration ever served.
	CacheMaxAge   time.Duration
	EnvoyLogLevel string
	// EnvoyComponentLogLevel is Envoy's --component-log-level:
	// <component>:<level>,… with Envoy's level names.
	EnvoyComponentLogLevel string
	Concurrency            int
	// EnvoyArgs follow the agent's own arguments on Envoy's command line.
	EnvoyArgs []string

	// HealthAddress is host:port for a listener serving only GET /ready,
	// for load balancers on other hosts; "" for none.
	HealthAddress string
	// MetricsAddress is host:port for a second listener serving only
	// /metrics; empty serves it beside /ready on loopback alone.
	MetricsAddress string

	RetryInitial     time.Duration
	RetryMax         time.Duration
	BootstrapTimeout time.Duration

	LogLevel  string
	LogFormat string
}

// Defaults for every key that has one. Name, Workload, Address and WorkDir
// are derived from the host and the other keys when left empty.
const (
	DefaultIngressPort   = 10001
	DefaultEgressPort    = 10002
	DefaultAdminPort     = 9901
	DefaultCPAddress     = "https://localhost:5678"
	DefaultEnvoyBinary   = "envoy"
	DefaultReadinessPort = 9902
	DefaultDrainTime     = 30 * time.Second
	DefaultDrainMin      = 5 * time.Second
	DefaultCacheMaxAge   = 72 * time.Hour
	DefaultEnvoyLogLevel = "info"
	DefaultRetryInitial  = time.Second
	DefaultRetryMax      = 5 * time.Second
	DefaultLogLevel      = "info"
	DefaultLogFormat     = "console"
)

// HealthListener is the address of the load balancers' /ready listener,
// and false when there is none (the default).
func (c *Config) HealthListener() (string, bool) {
	if _, _, err := net.SplitHostPort(c.HealthAddress); c.HealthAddress == "" || err != nil {
		return "", false
	}
	return c.HealthAddress, true
}

// MetricsListener is the address of the extra /metrics listener, and
// false when /metrics is only on the readiness listener (the default).
func (c *Config) MetricsListener() (string, bool) {
	host, port, err := net.SplitHostPort(c.MetricsAddress)
	if c.MetricsAddress == "" || err != nil {
		return "", false
	}
	if p, err := strconv.Atoi(port); err == nil && host == "127.0.0.1" && p == c.ReadinessPort {
		return "", false
	}
	return c.MetricsAddress, true
}

// EnvoyLogLevels are the levels Envoy's --log-level accepts.
var EnvoyLogLevels = []string{"trace", "debug", "info", "warning", "warn", "error", "critical", "off"}

// envoyLoggerName is the shape of Envoy's logger (component) names, e.g.
// upstream, http2; the list itself depends on the Envoy build.
var envoyLoggerName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ValidEnvoyLoggerName tells whether s has the shape of an Envoy logger name.
func ValidEnvoyLoggerName(s string) bool { return envoyLoggerName.MatchString(s) }

// LogLevels are the agent's own levels.
var LogLevels = []string{"debug", "info", "warn", "error"}

// LogFormats are the agent's log encodings.
var LogFormats = []string{"console", "json"}
