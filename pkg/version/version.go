// Package version carries build information set with -ldflags -X.
package version

import (
	"fmt"
	"strings"
)

var (
	// Version is the release version, e.g. 1.2.3.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = "unknown"
	// BuildDate is when the binary was built (RFC 3339).
	BuildDate = "unknown"

	// Kuma is the Kuma release this build speaks the control plane's
	// protocol of. It is what the agent reports as kumaDp.version: kuma-cp
	// marks a data plane more than two minor versions away from itself as
	// incompatible, and zoneproxy's own version means nothing to it.
	Kuma = "3.0.0"
	// Envoy is the Envoy release that Kuma release ships with; Envoy of
	// the same minor version is compatible, as kuma-dp judges it.
	Envoy = "1.39.0"
)

// String is the one-line form printed by `zoneproxy version`.
func String() string {
	return fmt.Sprintf("zoneproxy %s (commit %s, built %s; for Kuma %s, Envoy %s)", Version, Commit, BuildDate, Kuma, minor(Envoy)+".x")
}

// Info is the build as `zoneproxy version -o json` prints it; its field
// names are stable.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	Kuma      string `json:"kuma"`  // the Kuma release it speaks for
	Envoy     string `json:"envoy"` // the Envoy releases that Kuma release is tested with, e.g. 1.39.x
}

// Current is this build's Info.
func Current() Info {
	return Info{Version: Version, Commit: Commit, BuildDate: BuildDate, Kuma: Kuma, Envoy: ExpectedEnvoy()}
}

// EnvoyCompatible reports whether an Envoy of version v is the minor
// release Kuma expects (kuma-dp's `~<expected>` constraint).
func EnvoyCompatible(v string) bool {
	m := minor(v)
	return m != "" && m == minor(Envoy)
}

// ExpectedEnvoy is how messages name the compatible Envoy versions.
func ExpectedEnvoy() string { return minor(Envoy) + ".x" }

// minor is "1.39" of "1.39.2", or "" if v is not major.minor.patch.
func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 3 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	for _, p := range parts[:2] {
		if strings.Trim(p, "0123456789") != "" {
			return ""
		}
	}
	return parts[0] + "." + parts[1]
}
