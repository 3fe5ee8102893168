package cli

import (
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// rawValue keeps a number or duration flag as typed, so that a bad value
// is reported with every other problem instead of stopping flag parsing.
type rawValue struct {
	value, kind string
}

func (r *rawValue) String() string     { return r.value }
func (r *rawValue) Set(s string) error { r.value = s; return nil }
func (r *rawValue) Type() string       { return r.kind }

func intFlag(fs *pflag.FlagSet, name string, def int, usage string) {
	fs.Var(&rawValue{strconv.Itoa(def), "int"}, name, usage)
}

func durationFlag(fs *pflag.FlagSet, name string, def time.Duration, usage string) {
	fs.Var(&rawValue{def.String(), "duration"}, name, usage)
}

// addRunFlags declares every setting of `run` (and `check`, `render`).
// Each is also env ZONEPROXY_<NAME> and key <name> of the --config file.
func addRunFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML file whose keys are these flag names (flags > env ZONEPROXY_* > file > defaults)")
	fs.String("mesh", "", "mesh this zone proxy serves (required)")
	fs.String("role", "", "ingress, egress or combined (required)")
	fs.String("name", "", "Dataplane name (default zone-proxy-<mesh>-<role>-<short hostname>)")
	fs.String("workload", "", "kuma.io/workload label (default zone-proxy-<mesh>-<role>)")
	fs.StringArray("label", nil, "extra Dataplane label key=value (repeatable)")
	fs.String("address", "", "IP zone peers reach this proxy on; Envoy binds it (default: the host's first non-loopback IPv4)")
	intFlag(fs, "ingress-port", config.DefaultIngressPort, "ZoneIngress listener port")
	intFlag(fs, "egress-port", config.DefaultEgressPort, "ZoneEgress listener port")
	intFlag(fs, "admin-port", config.DefaultAdminPort, "port the control plane exposes Envoy's admin/readiness on at --address; distinct per zone proxy on a host")
	fs.String("cp-address", config.DefaultCPAddress, "zone control plane DP server URL")
	fs.String("ca-cert-file", "", "CA certificate (PEM) that signed the control plane's certificate (default: system trust store)")
	fs.String("dataplane-token-file", "", "file holding the dataplane token")
	fs.String("dataplane-token", "", "inline dataplane token (discouraged: visible in the process list)")
	fs.String("envoy-binary", config.DefaultEnvoyBinary, "Envoy binary, a path or a name on PATH")
	fs.String("work-dir", "", "directory for Envoy's bootstrap and admin socket (default $RUNTIME_DIRECTORY, else a private temp dir removed at exit)")
	intFlag(fs, "readiness-port", config.DefaultReadinessPort, "loopback port serving /ready")
	fs.String("metrics-address", "", "host:port serving only /metrics, for Prometheus on other hosts, e.g. 0.0.0.0:9903 (default 127.0.0.1:<readiness-port>, beside /ready and /logging)")
	durationFlag(fs, "drain-time", config.DefaultDrainTime, "how long to drain Envoy on stop")
	durationFlag(fs, "drain-min", config.DefaultDrainMin, "least time between failing health checks and the end of a drain, so a load balancer sees it (capped at --drain-time)")
	fs.String("envoy-log-level", config.DefaultEnvoyLogLevel, "Envoy's log level")
	intFlag(fs, "concurrency", 0, "Envoy worker threads (0 = Envoy's default)")
	durationFlag(fs, "retry-initial", config.DefaultRetryInitial, "first bootstrap retry delay")
	durationFlag(fs, "retry-max", config.DefaultRetryMax, "longest bootstrap retry delay")
	durationFlag(fs, "bootstrap-timeout", 0, "give up bootstrapping after this long (0 = wait forever)")
	fs.String("log-level", config.DefaultLogLevel, "debug, info, warn or error")
	fs.String("log-format", config.DefaultLogFormat, "console or json")
}
