#!/bin/sh
# Prints the path of a promtool, fetching one into .cache/promtool if there
# is none on PATH. Nothing is installed and no service is started: the
# Debian/Ubuntu prometheus package is downloaded (apt-get download, no root
# needed) and only its promtool is unpacked. (`go install …/promtool@v…`
# cannot build it: the prometheus module's go.mod has replace directives.)
#   packaging/ensure-promtool.sh
set -eu

cd "$(dirname "$0")/.."
if command -v promtool >/dev/null 2>&1; then
	command -v promtool
	exit 0
fi
dir=.cache/promtool
if [ -x "$dir/promtool" ]; then
	echo "$PWD/$dir/promtool"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
	echo "ensure-promtool: no promtool on PATH: install it (the prometheus package, or a Prometheus release's promtool)" >&2
	exit 1
fi
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "ensure-promtool: unpacking promtool from the prometheus package" >&2
# apt-get download warns when _apt cannot write the directory: harmless.
# Stale package lists (a moved point release) are refreshed once, as root.
(cd "$tmp" && apt-get download -qq prometheus 2>/dev/null) ||
	{ [ "$(id -u)" -eq 0 ] && apt-get update -qq >/dev/null && (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null); } ||
	{ echo "ensure-promtool: apt-get download prometheus failed; install promtool and put it on PATH" >&2; exit 1; }
dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -xf - -C "$tmp" ./usr/bin/promtool
mv "$tmp/usr/bin/promtool" "$dir/promtool"
echo "$PWD/$dir/promtool"
