// Package version carries build information set with -ldflags -X, and the
// Kuma releases this build supports.
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
)

// KumaRelease is a Kuma release line this build supports.
type KumaRelease struct {
	// Kuma is what the agent reports as kumaDp.version to that release's
	// control plane: kuma-cp marks a data plane more than two minor
	// versions away from itself (another major included) as incompatible,
	// and zoneproxy's own version means nothing to it.
	Kuma string
	// Envoy is the Envoy release that Kuma release's kuma-dp is built with;
	// Envoy of the same minor version is compatible, as kuma-dp judges it.
	Envoy string
	// DeltaADS: the bootstrap that release's kuma-cp gives asks for delta
	// ADS (3.0); 2.x gives state of the world.
	DeltaADS bool
}

// Line is "2.14" of Kuma 2.14.3.
func (r KumaRelease) Line() string { return minor(r.Kuma) }

// ExpectedEnvoy is how messages name the Envoy versions r is built with.
func (r KumaRelease) ExpectedEnvoy() string { return minor(r.Envoy) + ".x" }

// EnvoyCompatible reports whether an Envoy of version v is the minor
// release r's kuma-dp is built with (kuma-dp's `~<expected>` constraint).
func (r KumaRelease) EnvoyCompatible(v string) bool {
	m := minor(v)
	return m != "" && m == minor(r.Envoy)
}

var (
	// Kuma30 is Kuma 3.0: delta ADS, mesh-scoped zone proxies only.
	Kuma30 = KumaRelease{Kuma: "3.0.0", Envoy: "1.39.0", DeltaADS: true}
	// Kuma214 is Kuma 2.14 (2.14.3, the newest 2.x): SotW ADS, legacy and
	// mesh-scoped zone proxies side by side.
	Kuma214 = KumaRelease{Kuma: "2.14.3", Envoy: "1.37.0"}
	// Supported are the Kuma releases this build is tested with, newest
	// first.
	Supported = []KumaRelease{Kuma30, Kuma214}
)

// ForADS is the supported release whose control plane speaks the ADS
// kind Envoy's bootstrap asks for: the relay reports it on each stream
// it opens, so a 2.14 control plane does not flag the proxy incompatible.
func ForADS(delta bool) KumaRelease {
	if delta {
		return Kuma30
	}
	return Kuma214
}

// Newest is the newest supported release: what a bootstrap request,
// sent before the control plane's release is known, reports.
func Newest() KumaRelease { return Supported[0] }

// String is the one-line form printed by `zoneproxy version`.
func String() string {
	return fmt.Sprintf("zoneproxy %s (commit %s, built %s; for %s)", Version, Commit, BuildDate, supportedText())
}

// supportedText is "Kuma 3.0 with Envoy 1.39.x, Kuma 2.14 with Envoy 1.37.x".
func supportedText() string {
	parts := make([]string, 0, len(Supported))
	for _, r := range Supported {
		parts = append(parts, "Kuma "+r.Line()+" with Envoy "+r.ExpectedEnvoy())
	}
	return strings.Join(parts, ", ")
}

// Info is the build as `zoneproxy version -o json` prints it; its field
// names are stable.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	Kuma      string `json:"kuma"`  // the newest Kuma release it supports
	Envoy     string `json:"envoy"` // the Envoy releases that release is built with, e.g. 1.39.x
	// Supports lists every supported Kuma release, newest first.
	Supports []ReleaseInfo `json:"supports"`
}

// ReleaseInfo is a supported Kuma release in Info.
type ReleaseInfo struct {
	Kuma  string `json:"kuma"`  // e.g. 2.14.x
	Envoy string `json:"envoy"` // e.g. 1.37.x
	ADS   string `json:"ads"`   // "delta" or "sotw": what its kuma-cp's bootstrap asks for
}

// Current is this build's Info.
func Current() Info {
	n := Newest()
	info := Info{Version: Version, Commit: Commit, BuildDate: BuildDate, Kuma: n.Kuma, Envoy: n.ExpectedEnvoy()}
	for _, r := range Supported {
		ads := "sotw"
		if r.DeltaADS {
			ads = "delta"
		}
		info.Supports = append(info.Supports, ReleaseInfo{Kuma: r.Line() + ".x", Envoy: r.ExpectedEnvoy(), ADS: ads})
	}
	return info
}

// EnvoyCompatible reports whether an Envoy of version v is one a
// supported Kuma release is built with.
func EnvoyCompatible(v string) bool {
	for _, r := range Supported {
		if r.EnvoyCompatible(v) {
			return true
		}
	}
	return false
}

// ExpectedEnvoy is how messages name the compatible Envoy versions:
// "1.39.x (Kuma 3.0) or 1.37.x (Kuma 2.14)".
func ExpectedEnvoy() string {
	parts := make([]string, 0, len(Supported))
	for _, r := range Supported {
		parts = append(parts, r.ExpectedEnvoy()+" (Kuma "+r.Line()+")")
	}
	return strings.Join(parts, " or ")
}

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
