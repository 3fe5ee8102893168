#!/bin/sh
# Prints the package version, in a form that sorts right for dpkg and rpm:
#   $VERSION if set; else from git:
#     tag v1.2.3 on HEAD            -> 1.2.3
#     tag v1.2.3-rc.1 on HEAD       -> 1.2.3~rc.1    (before 1.2.3)
#     3 commits after v1.2.3        -> 1.2.3+git20261122140929.abc1234
#     no tag at all                 -> 0.0.0~git20261122140929.abc1234
#   (the timestamp is the commit time in UTC, so snapshots sort by commit);
#   else the first line of ./VERSION (release tarballs). Otherwise it fails:
#   a package must never get a made-up version.
set -eu

die() { echo "version.sh: $*" >&2; exit 1; }

check() {
	case "$1" in
		[0-9]*) ;;
		*) die "version '$1' must start with a digit" ;;
	esac
	case "$1" in
		*[!0-9A-Za-z.+~]*) die "version '$1' may only contain 0-9 A-Z a-z . + ~" ;;
	esac
	printf '%s\n' "$1"
}

if [ -n "${VERSION:-}" ]; then
	check "$VERSION"
	exit 0
fi

if command -v git >/dev/null 2>&1 && git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	sha=$(git rev-parse --short=7 HEAD)
	stamp=$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)
	if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
		base=$(printf '%s' "${tag#v}" | tr '-' '~')
		if [ "$(git rev-list -n1 "$tag")" = "$(git rev-parse HEAD)" ]; then
			check "$base"
		else
			check "$base+git$stamp.$sha"
		fi
	else
		check "0.0.0~git$stamp.$sha"
	fi
	exit 0
fi

if [ -f VERSION ]; then
	v=$(sed -n '1{s/^[[:space:]]*v\{0,1\}//;s/[[:space:]]*$//;p;}' VERSION)
	[ -n "$v" ] || die "VERSION file is empty"
	check "$v"
	exit 0
fi

die "cannot tell the version: no git checkout and no VERSION file (or set VERSION=1.2.3)"
