#!/bin/sh
# Builds the .deb and/or .rpm from packaging/nfpm.yaml.
#   packaging/build-packages.sh [deb] [rpm]        (default: both)
# Environment:
#   VERSION            package version (default: packaging/version.sh)
#   ARCH               amd64 or arm64 (default amd64)
#   ZONEPROXY_BIN      the release binary (default bin/zoneproxy, from
#                      `make build-release`); its embedded version must match
#   PKG_OUT            where the packages go (default dist)
#   SOURCE_DATE_EPOCH  timestamps (default: last commit time); same inputs
#                      and epoch give byte-identical packages
#   COMMIT             named in a snapshot's changelog entry (default: HEAD)
set -eu

die() { echo "build-packages: $*" >&2; exit 1; }

cd "$(dirname "$0")/.."

VERSION=$(packaging/version.sh) || exit 1
ARCH=${ARCH:-amd64}
ZONEPROXY_BIN=${ZONEPROXY_BIN:-bin/zoneproxy}
PKG_OUT=${PKG_OUT:-dist}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null) ||
		die "SOURCE_DATE_EPOCH is unset and there is no git history to take it from"
fi
export VERSION ARCH ZONEPROXY_BIN SOURCE_DATE_EPOCH

[ -f "$ZONEPROXY_BIN" ] || die "$ZONEPROXY_BIN is missing: run 'make build-release' first"
# A stale binary would ship the wrong version; -trimpath drops ldflags from
# the build info, so look for the string itself (works for any GOARCH).
grep -qaF "$VERSION" "$ZONEPROXY_BIN" ||
	die "$ZONEPROXY_BIN was not built as version '$VERSION': run 'make build-release'"

rm -rf dist/docs
mkdir -p dist "$PKG_OUT"
go run ./packaging/gendocs -out dist/docs -version "$VERSION"

# The newest changelog entry must name the package's version-release
# (rpmlint: incoherent-version-in-changelog); other builds get their own.
top=$(sed -n 's/^- semver: *//p' packaging/changelog.yaml | head -n1)
if [ "$top" = "$VERSION-1" ]; then
	cp packaging/changelog.yaml dist/changelog.yaml
else
	date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
	commit=${COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
	{
		printf -- '- semver: %s-1\n' "$VERSION"
		printf '  date: %s\n' "$date"
		printf '  packager: zoneproxy maintainers <zoneproxy@example.invalid>\n'
		printf '  deb:\n    urgency: low\n    distributions: [UNRELEASED]\n'
		printf '  changes:\n    - note: Snapshot build of commit %s.\n' "$commit"
		cat packaging/changelog.yaml
	} >dist/changelog.yaml
fi

# nfpm cannot glob `type: doc`; list the generated man pages one by one.
: >dist/rpm-man.yaml
for page in dist/docs/man/*.1.gz; do
	printf '  - {src: %s, dst: /usr/share/man/man1/%s, packager: rpm, type: doc, file_info: {mode: 0644}}\n' \
		"$page" "$(basename "$page")" >>dist/rpm-man.yaml
done
# Likewise the examples, with their directories, which rpm removes on erase
# only if the package owns them.
{
	printf '  - {dst: /usr/share/doc/zoneproxy, type: dir, packager: rpm, file_info: {mode: 0755}}\n'
	find examples -type d | LC_ALL=C sort | while read -r d; do
		printf '  - {dst: /usr/share/doc/zoneproxy/%s, type: dir, packager: rpm, file_info: {mode: 0755}}\n' "$d"
	done
	find examples -type f | LC_ALL=C sort | while read -r f; do
		printf '  - {src: %s, dst: /usr/share/doc/zoneproxy/%s, packager: rpm, type: doc, file_info: {mode: 0644}}\n' "$f" "$f"
	done
} >dist/rpm-examples.yaml
sed -e '/# @rpm-man-pages@/{r dist/rpm-man.yaml' -e 'd;}' \
	-e '/# @rpm-examples@/{r dist/rpm-examples.yaml' -e 'd;}' packaging/nfpm.yaml >dist/nfpm.yaml

[ $# -gt 0 ] || set -- deb rpm
for p in "$@"; do
	case "$p" in
		deb | rpm) ;;
		*) die "unknown packager '$p' (deb or rpm)" ;;
	esac
	# Leave exactly one package per format behind, for the lint and e2e steps.
	rm -f "$PKG_OUT"/zoneproxy_*."$p" "$PKG_OUT"/zoneproxy-*."$p"
	go tool -modfile=tools/go.mod nfpm package -f dist/nfpm.yaml -p "$p" -t "$PKG_OUT/"
done
