package controlplane

import (
	"regexp"
	"strconv"
	"strings"
)

// semverPattern is what Masterminds semver's NewVersion accepts: an
// optional "v", one to three numbers, a prerelease and build metadata.
var semverPattern = regexp.MustCompile(`^v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

type semver struct {
	major, minor int64
	prerelease   bool
}

func parseSemver(v string) (semver, bool) {
	m := semverPattern.FindStringSubmatch(v)
	if m == nil {
		return semver{}, false
	}
	major, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return semver{}, false
	}
	var minor int64
	if m[2] != "" {
		if minor, err = strconv.ParseInt(m[2], 10, 64); err != nil {
			return semver{}, false
		}
	}
	return semver{major: major, minor: minor, prerelease: m[4] != ""}, true
}

// deploymentVersionCompatible is kuma-cp's DeploymentVersionCompatible
// (pkg/version/compatibility.go, the same at v2.14.3 and 3.0), which
// pkg/core/xds/metadata.go applies to the node metadata's
// version.kumaDp.version as KumaCpCompatible: a component is compatible
// within two minors either way of kuma-cp's own version, in the same major
// (">= M.m-2, <= M.m+2"; 2.14.3 accepts 2.12.0 to 2.16.x). Preview
// versions and versions that do not parse ("dev-…") are compatible; a
// prerelease ("2.14.0-rc1") never is, since the constraint has none.
func deploymentVersionCompatible(cpVersion, componentVersion string) bool {
	if strings.Contains(cpVersion, "preview") || strings.Contains(componentVersion, "preview") {
		return true
	}
	cp, ok := parseSemver(cpVersion)
	if !ok {
		return true
	}
	c, ok := parseSemver(componentVersion)
	if !ok {
		return true
	}
	if c.prerelease || c.major != cp.major {
		return false
	}
	return c.minor >= max(cp.minor-2, 0) && c.minor <= cp.minor+2
}
