package cli

import (
	"fmt"
	"maps"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// kumaDPFlag is a flag of `kuma-dp run` (its own or its root's) and what
// zoneproxy has for it.
type kumaDPFlag struct {
	short   string // kuma-dp's one-letter form
	noValue bool   // takes no value
	// use is zoneproxy's flag for it: the same name when shared, "" when
	// there is none.
	use string
	// none says why zoneproxy has no such flag, starting "not needed" or
	// "not supported" as the migration guide's table does.
	none string
}

const (
	noDNS      = "not needed for a zone proxy: zoneproxy runs no DNS proxy"
	noRotation = "not supported: zoneproxy logs to stderr, which the journal keeps and rotates under systemd"
)

var (
	noTemplate = "not needed for a zone proxy: zoneproxy renders the Dataplane from " + flagList(config.KeyMesh, config.KeyRole, config.KeyName, config.KeyWorkload, config.KeyLabel, config.KeyAddress) +
		" and the ports (`zoneproxy render dataplane` prints it)"
	noMetricTLS = "not supported: the agent's /metrics is plain HTTP on " + config.KeyReadinessPort.Flag() + " or " + config.KeyMetricsAddress.Flag()
)

// flagList lists keys as flags: "--a, --b, --c".
func flagList(keys ...config.Key) string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Flag()
	}
	return strings.Join(out, ", ")
}

// kumaDPFlags are kuma-dp's `run` flags, those of earlier releases
// included, so that a unit written for kuma-dp is translated flag by flag:
// those zoneproxy has (config.Setting's KumaDP) and those it has not.
// docs/migration-from-kuma-dp.md lists each; a test keeps them in step.
var kumaDPFlags = withKumaDPSettings(kumaDPOnly)

// kumaDPOnly are kuma-dp's flags that zoneproxy has not.
var kumaDPOnly = map[string]kumaDPFlag{
	"log-output-path":          {none: noRotation},
	"log-max-retained-files":   {none: noRotation},
	"log-max-size":             {none: noRotation},
	"log-max-age":              {none: noRotation},
	"skip-verify":              {noValue: true, none: "not supported: the control plane's certificate is always verified; give its CA with " + config.KeyCACertFile.Flag()},
	"proxy-type":               {none: "not needed for a zone proxy: the kind of zone proxy is " + config.KeyRole.Flag() + " ingress, egress or combined"},
	"dataplane":                {none: noTemplate},
	"dataplane-file":           {short: "d", none: noTemplate},
	"dataplane-var":            {short: "v", none: "not needed for a zone proxy: there are no templates; give per-host values as " + config.EnvPrefix + "* variables, e.g. in /etc/zoneproxy/<instance>.env"},
	"metrics-cert-path":        {none: noMetricTLS},
	"metrics-key-path":         {none: noMetricTLS},
	"bind-outbounds":           {noValue: true, none: "not needed for a zone proxy: it has no outbounds"},
	"transparent-proxy":        {noValue: true, none: "not needed for a zone proxy: it runs without a transparent proxy"},
	"transparent-proxy-config": {none: "not needed for a zone proxy: it runs without a transparent proxy"},
	"dns-enabled":              {noValue: true, none: noDNS},
	"dns-proxy-port":           {none: noDNS},
	// Earlier releases.
	"bootstrap-version":                {none: "not needed: Envoy's v3 API is the only one"},
	"dns-envoy-port":                   {none: noDNS},
	"dns-coredns-port":                 {none: noDNS},
	"dns-coredns-empty-port":           {none: noDNS},
	"dns-coredns-path":                 {none: noDNS},
	"dns-coredns-config-template-path": {none: noDNS},
	"dns-server-config-dir":            {none: noDNS},
	"dns-prometheus-port":              {none: noDNS},
	"dns-enable-logging":               {noValue: true, none: noDNS},
}

// withKumaDPSettings adds the kuma-dp flags zoneproxy has to those it has not.
func withKumaDPSettings(others map[string]kumaDPFlag) map[string]kumaDPFlag {
	all := maps.Clone(others)
	for _, s := range config.Settings() {
		names := s.KumaDPAlso
		if s.KumaDP {
			names = append([]string{string(s.Key)}, names...)
		}
		for _, name := range names {
			all[name] = kumaDPFlag{use: string(s.Key)}
		}
	}
	return all
}

// kumaDPEquivalent is zoneproxy's flag for a kuma-dp flag ("" for none),
// and whether name is kuma-dp's at all.
func kumaDPEquivalent(name string) (use string, ok bool) {
	f, ok := kumaDPFlags[name]
	return f.use, ok
}

// kumaDPByShort finds a kuma-dp flag by its one-letter form.
func kumaDPByShort(short string) (string, bool) {
	for name, f := range kumaDPFlags {
		if f.short != "" && f.short == short {
			return name, true
		}
	}
	return "", false
}

// kumaDPHint explains a kuma-dp flag that zoneproxy does not take under
// that name; "" when name is not kuma-dp's or is zoneproxy's too.
func kumaDPHint(name string) string {
	f, ok := kumaDPFlags[name]
	switch {
	case !ok || f.use == name:
		return ""
	case f.use != "":
		return fmt.Sprintf("kuma-dp's --%s is --%s in zoneproxy", name, f.use)
	}
	return fmt.Sprintf("kuma-dp's --%s is %s", name, f.none)
}
