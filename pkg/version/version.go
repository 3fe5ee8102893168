// Package version carries build information set with -ldflags -X.
package version

import "fmt"

var (
	// Version is the release version, e.g. 1.2.3.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = "unknown"
	// BuildDate is when the binary was built (RFC 3339).
	BuildDate = "unknown"
)

// String is the one-line form printed by `zoneproxy version`.
func String() string {
	return fmt.Sprintf("zoneproxy %s (commit %s, built %s)", Version, Commit, BuildDate)
}
