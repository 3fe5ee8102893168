package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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

type kind int

const (
	text kind = iota
	number
	duration
	boolean
	list // repeatable flag
)

// setting is flag --<name>, environment variable ZONEPROXY_<NAME> and key
// <name> of the --config file.
type setting struct {
	name  string
	kind  kind
	def   string // as it would be typed; "" for none
	usage string
}

func itoa(n int) string { return strconv.Itoa(n) }

// settings are every setting of every command. The environment and the
// config file describe one zone proxy for all commands, so each command
// accepts them all there; its flags are only those it uses.
var settings = []setting{
	{"config", text, "", "YAML file whose keys are the flag names (flags > env ZONEPROXY_* > file > defaults); keys only other commands use are ignored"},
	{"mesh", text, "", "mesh this zone proxy serves (required)"},
	{"role", text, "", "ingress, egress or combined (required)"},
	{"name", text, "", "Dataplane name (default zone-proxy-<mesh>-<role>-<short hostname>)"},
	{"workload", text, "", "kuma.io/workload label (default zone-proxy-<mesh>-<role>)"},
	{"label", list, "", "extra Dataplane label key=value (repeatable; k=v,k2=v2 in the environment)"},
	{"address", text, "", "IP zone peers reach this proxy on; Envoy binds it (default: the IPv4 address of the interface the default route leaves through)"},
	{"ingress-port", number, itoa(config.DefaultIngressPort), "ZoneIngress listener port"},
	{"egress-port", number, itoa(config.DefaultEgressPort), "ZoneEgress listener port"},
	{"admin-port", number, itoa(config.DefaultAdminPort), "port the control plane exposes Envoy's admin/readiness on at --address; distinct per zone proxy on a host"},
	{"cp-address", text, config.DefaultCPAddress, "zone control plane DP server URL"},
	{"ca-cert-file", text, "", "CA certificate (PEM) that signed the control plane's certificate (default: system trust store)"},
	{"dataplane-token-file", text, "", "file holding the dataplane token"},
	{"dataplane-token", text, "", "inline dataplane token (discouraged: visible in the process list)"},
	{"envoy-binary", text, config.DefaultEnvoyBinary, "Envoy binary, a path or a name on PATH"},
	{"work-dir", text, "", "directory for Envoy's bootstrap and admin socket (default $RUNTIME_DIRECTORY, else a private temp dir removed at exit)"},
	{"readiness-port", number, itoa(config.DefaultReadinessPort), "loopback port serving /ready"},
	{"health-address", text, "", "host:port serving only GET /ready (its status code and one-line reason) for load balancers on other hosts, e.g. 0.0.0.0:9904 (default: none; /ready is on 127.0.0.1:<readiness-port>)"},
	{"metrics-address", text, "", "host:port serving only /metrics, for Prometheus on other hosts, e.g. 0.0.0.0:9903 (default 127.0.0.1:<readiness-port>, beside /ready and /logging)"},
	{"drain-time", duration, config.DefaultDrainTime.String(), "how long to drain Envoy on stop"},
	{"drain-min", duration, config.DefaultDrainMin.String(), "least time between failing health checks and the end of a drain, so a load balancer sees it (capped at --drain-time)"},
	{"xds-relay", boolean, "true", "relay Envoy's xDS through the agent, which keeps the last-known-good configuration (false: Envoy talks to the control plane directly)"},
	{"state-dir", text, "", "directory for the last-known-good configuration (default $STATE_DIRECTORY, else $XDG_STATE_HOME/zoneproxy/<name>; \"\" keeps none)"},
	{"cache-max-age", duration, config.DefaultCacheMaxAge.String(), "never serve a cached configuration older than this"},
	{"envoy-log-level", text, config.DefaultEnvoyLogLevel, "Envoy's log level"},
	{"envoy-component-log-level", text, "", "Envoy's log levels per component, e.g. upstream:debug,connection:trace (Envoy's --component-log-level)"},
	{"concurrency", number, "0", "Envoy worker threads (0 = one per CPU this process may use: Envoy's --cpuset-threads)"},
	{"envoy-arg", list, "", "extra argument for Envoy, after the agent's own (repeatable, one argument each; space-separated in the environment)"},
	{"retry-initial", duration, config.DefaultRetryInitial.String(), "first bootstrap retry delay"},
	{"retry-max", duration, config.DefaultRetryMax.String(), "longest bootstrap retry delay"},
	{"bootstrap-timeout", duration, "0s", "give up bootstrapping after this long (0 = wait forever)"},
	{"log-level", text, config.DefaultLogLevel, "debug, info, warn or error"},
	{"log-format", text, config.DefaultLogFormat, "console or json"},
	{"zone", text, "", "zone name for the kuma.io/zone label (required)"},
	{"advertised-address", text, "", "address other zones reach this ingress on (default --address)"},
	{"advertised-port", number, "0", "port other zones reach this ingress on (default --ingress-port)"},
}

// Which settings each command takes as flags.
var (
	// dataplaneFlags shape the Dataplane resource.
	dataplaneFlags = []string{"config", "mesh", "role", "name", "workload", "label", "address", "ingress-port", "egress-port", "admin-port"}
	// bootstrapFlags are what one bootstrap request needs.
	bootstrapFlags = append(slices.Clone(dataplaneFlags), "cp-address", "ca-cert-file", "dataplane-token-file", "dataplane-token", "envoy-binary", "work-dir", "readiness-port")
	// runFlags are every setting of the zone proxy; check validates them all.
	runFlags = runSettings()
	// meshZoneAddressFlags describe the ingress as other zones reach it.
	meshZoneAddressFlags = []string{"config", "mesh", "role", "name", "address", "ingress-port", "zone", "advertised-address", "advertised-port"}
)

// meshZoneAddressOnly are the settings no zone proxy's Config holds.
var meshZoneAddressOnly = []string{"zone", "advertised-address", "advertised-port"}

func runSettings() []string {
	var out []string
	for _, s := range settings {
		if !slices.Contains(meshZoneAddressOnly, s.name) {
			out = append(out, s.name)
		}
	}
	return out
}

func lookupSetting(name string) (setting, bool) {
	for _, s := range settings {
		if s.name == name {
			return s, true
		}
	}
	return setting{}, false
}

// envName is the environment variable of a setting.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// addFlags declares the named settings as flags; the help names each one's
// environment variable.
func addFlags(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		s, ok := lookupSetting(name)
		if !ok {
			panic("cli: no setting " + name)
		}
		usage := fmt.Sprintf("%s (env %s)", s.usage, envName(s.name))
		switch s.kind {
		case text:
			fs.String(s.name, s.def, usage)
		case number:
			fs.Var(&rawValue{s.def, "int"}, s.name, usage)
		case duration:
			fs.Var(&rawValue{s.def, "duration"}, s.name, usage)
		case boolean:
			fs.Var(&rawValue{s.def, "bool"}, s.name, usage)
			fs.Lookup(s.name).NoOptDefVal = "true"
		case list:
			fs.StringArray(s.name, nil, usage)
		}
	}
}
