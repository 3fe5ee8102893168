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
// paces the drain itself; access-log files (the MeshAccessLog FIFO among
// them) are flushed every second instead of Envoy's 10, so lines reach
// their backends promptly (istio's pilot-agent does the same).
func Args(o Options) []string {
	args := []string{
		"--config-path", o.ConfigPath,
		"--drain-time-s", strconv.Itoa(int(math.Ceil(o.DrainTime.Seconds()))),
		"--drain-strategy", "immediate",
		"--disable-hot-restart",
		"--file-flush-interval-msec", "1000",
		"--log-level", o.LogLevel,
	}
	if o.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(o.Concurrency))
	}
	return args
}
