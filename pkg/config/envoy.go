package config

import (
	"slices"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// validateEnvoyCommandLine checks what reaches Envoy's command line beside
// the agent's own arguments: Envoy would refuse a repeated flag at start.
func (c *Config) validateEnvoyCommandLine(add func(key Key, format string, args ...any)) {
	if c.EnvoyComponentLogLevel != "" {
		for _, part := range strings.Split(c.EnvoyComponentLogLevel, ",") {
			component, level, ok := strings.Cut(part, ":")
			switch {
			case !ok || strings.Contains(level, ":"):
				add(KeyEnvoyComponentLogLevel, "%q is not <component>:<level>: write e.g. upstream:debug,connection:trace", part)
			case !ValidEnvoyLoggerName(component):
				add(KeyEnvoyComponentLogLevel, "%q: %q is not an Envoy logger name (lower-case letters, digits and _, e.g. upstream)", part, component)
			case !slices.Contains(EnvoyLogLevels, level):
				add(KeyEnvoyComponentLogLevel, "%q: %q is not an Envoy log level: use one of %s", part, level, strings.Join(EnvoyLogLevels, ", "))
			}
		}
	}
	for _, a := range c.EnvoyArgs {
		if instead, reserved := envoy.ReservedArg(a); reserved {
			add(KeyEnvoyArg, "%q is the agent's to set: %s", a, instead)
		}
	}
}
