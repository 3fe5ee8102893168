#!/bin/sh
# Installs missing tools with apt-get; quiet and quick when all are present.
#   packaging/ensure-tools.sh command[:package] ...
# e.g. packaging/ensure-tools.sh lintian rpmlint rpm shellcheck dpkg-deb:dpkg
set -eu

missing=""
for spec in "$@"; do
	cmd=${spec%%:*}
	pkg=${spec#*:}
	command -v "$cmd" >/dev/null 2>&1 || missing="$missing $pkg"
done
[ -n "$missing" ] || exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-tools: missing:$missing (install them, e.g. apt-get install$missing)" >&2
	exit 1
fi
echo "ensure-tools: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# One update per run that installs anything; lists may be absent or stale.
apt-get update -qq >/dev/null
# shellcheck disable=SC2086 # one package per word
apt-get install -y -qq $missing >/dev/null
