package config

import (
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// clockStatus is asked only when a token's times look wrong; tests fake it.
var clockStatus timesync.Checker = timesync.Check

// tokenTime decides what a token that is not valid at the local time means.
// Only an expired token on a synchronised clock is a configuration error:
// a token not valid yet becomes valid by itself, and on a clock that may be
// wrong (a VM at boot, before NTP) the control plane has the last word.
func tokenTime(key Key, where string, te *token.TimeError, add, warn func(key Key, format string, args ...any)) {
	clock := clockStatus()
	switch {
	case clock.Problem() != "":
		warn(key, "%s; %s looks unusable: %v. zoneproxy keeps going: the control plane decides, and accepts it once the clock is right", clock.Problem(), premade(where), te)
	case te.NotYetValid:
		warn(key, "%s is not valid yet: %v. zoneproxy keeps going, but the control plane refuses Envoy until then (its clock may be ahead of this host's)", premade(where), te)
	default:
		add(key, "%s cannot be used: %v; issue a new one", premade(where), te)
	}
}

// caTime decides what a CA file none of whose certificates is valid at the
// local time means, as tokenTime does for a token: only an expired one on
// a synchronised clock is a configuration error (exit 78: the file must be
// replaced); one not valid yet becomes valid by itself, and a clock that
// may be wrong is left to the TLS handshake, which the agent retries.
func caTime(path string, te *CATimeError, add, warn func(key Key, format string, args ...any)) {
	clock := clockStatus()
	switch {
	case clock.Problem() != "":
		warn(KeyCACertFile, "%s; %s looks unusable: %v. zoneproxy keeps going and retries the control plane until the clock is right", clock.Problem(), path, te)
	case te.NotYetValid:
		warn(KeyCACertFile, "%s: %v; the control plane's certificate cannot be verified until then: zoneproxy keeps retrying", path, te)
	default:
		add(KeyCACertFile, "%s: %v; the control plane's certificate cannot be verified with it: give the control plane's current CA certificate", path, te)
	}
}
