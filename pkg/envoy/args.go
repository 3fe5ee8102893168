package envoy

import (
	"math"
	"strconv"
	"time"
)

// Options are the command-line settings the agent controls.
type Options struct {
	ConfigPath  string
	DrainTime   time.Duration
	LogLevel    string
	Concurrency int // 0 = Envoy's default
}

// Args builds Envoy's command line. Hot restart is disabled so that several
// zone proxies can share a host; drain strategy immediate because the agent
// paces the drain itself.
func Args(o Options) []string {
	args := []string{
		"--config-path", o.ConfigPath,
		"--drain-time-s", strconv.Itoa(int(math.Ceil(o.DrainTime.Seconds()))),
		"--drain-strategy", "immediate",
		"--disable-hot-restart",
		"--log-level", o.LogLevel,
	}
	if o.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(o.Concurrency))
	}
	return args
}
