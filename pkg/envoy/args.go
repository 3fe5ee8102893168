package envoy

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config/key"
)

// Options are the command-line settings the agent controls.
type Options struct {
	ConfigPath string
	DrainTime  time.Duration
	LogLevel   string
	// ComponentLogLevel is Envoy's --component-log-level, e.g.
	// "upstream:debug,connection:trace"; empty passes nothing.
	ComponentLogLevel string
	Concurrency       int // 0 = as many workers as the CPUs this process may use
	// Extra arguments follow the agent's own; ReservedArg refuses those
	// that would clash with them.
	Extra []string
}

// Args builds Envoy's command line. Hot restart is disabled so that several
// zone proxies can share a host; drain strategy immediate because the agent
// paces the drain itself; access-log files (the MeshAccessLog FIFO among
// them) are flushed every second instead of Envoy's 10, so lines reach
// their backends promptly (istio's pilot-agent does the same). Without a
// concurrency, --cpuset-threads sizes Envoy's workers to the CPUs the unit
// may use (CPUAffinity=, cgroup cpusets), as kuma-dp does.
func Args(o Options) []string {
	args := []string{
		"--config-path", o.ConfigPath,
		"--drain-time-s", strconv.Itoa(int(math.Ceil(o.DrainTime.Seconds()))),
		"--drain-strategy", "immediate",
		"--disable-hot-restart",
		"--file-flush-interval-msec", "1000",
		"--log-level", o.LogLevel,
	}
	if o.ComponentLogLevel != "" {
		args = append(args, "--component-log-level", o.ComponentLogLevel)
	}
	if o.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(o.Concurrency))
	} else {
		args = append(args, "--cpuset-threads")
	}
	return append(args, o.Extra...)
}

const hotRestart = "hot restart is off so that zone proxies can share a host; the agent restarts Envoy itself"

// reserved are Envoy flags the agent sets, or that would break what it
// relies on, with what to do instead.
var reserved = map[string]string{
	"--config-path":                   "the agent runs Envoy with the control plane's bootstrap",
	"-c":                              "the agent runs Envoy with the control plane's bootstrap",
	"--config-yaml":                   "the agent runs Envoy with the control plane's bootstrap as it is",
	"--mode":                          "the agent runs Envoy to serve; `zoneproxy check` validates a setup",
	"--drain-time-s":                  "use " + key.DrainTime.Flag(),
	"--drain-strategy":                "the agent paces the drain itself: use " + key.DrainTime.Flag() + " and " + key.DrainMin.Flag(),
	"--log-level":                     "use " + key.EnvoyLogLevel.Flag(),
	"-l":                              "use " + key.EnvoyLogLevel.Flag(),
	"--component-log-level":           "use " + key.EnvoyComponentLogLevel.Flag(),
	"--concurrency":                   "use " + key.Concurrency.Flag(),
	"--cpuset-threads":                "the agent passes it when " + key.Concurrency.Flag() + " is 0",
	"--file-flush-interval-msec":      "the agent flushes access logs every second so that they reach their backends promptly",
	"--log-path":                      "Envoy's log goes through the agent, which keeps the token out of it, to stderr (the journal under systemd)",
	"--service-node":                  "the control plane's bootstrap names the node",
	"--service-cluster":               "the control plane's bootstrap names the node",
	"--service-zone":                  "the control plane's bootstrap names the node",
	"--disable-hot-restart":           "the agent passes it",
	"--base-id":                       hotRestart,
	"--use-dynamic-base-id":           hotRestart,
	"--base-id-path":                  hotRestart,
	"--restart-epoch":                 hotRestart,
	"--hot-restart-version":           hotRestart,
	"--parent-shutdown-time-s":        hotRestart,
	"--skip-hot-restart-on-no-parent": hotRestart,
	"--skip-hot-restart-parent-stats": hotRestart,
	"--version":                       "Envoy would print its version and exit; `zoneproxy check` shows it",
	"--help":                          "Envoy would print its usage and exit",
	"-h":                              "Envoy would print its usage and exit",
}

// ReservedArg reports whether an extra argument is one the agent owns, and
// what to do instead. Envoy reads "--flag value" in one argument as the
// flag and its value; "--flag=value" is named by its flag too.
func ReservedArg(arg string) (instead string, ok bool) {
	if !strings.HasPrefix(arg, "-") {
		return "", false
	}
	name, _, _ := strings.Cut(arg, " ")
	name, _, _ = strings.Cut(name, "=")
	instead, ok = reserved[name]
	return instead, ok
}
