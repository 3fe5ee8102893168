#!/bin/sh
# Validates cloud-config files with `cloud-init schema`.
#   packaging/check-cloud-init.sh FILE...
# Without cloud-init on PATH, Debian's cloud-init package is downloaded
# (apt-get download) and unpacked into .cache/cloud-init, never installed:
# an installed cloud-init would run at this machine's next boot. Its Python
# libraries are installed with apt-get when missing (root only).
set -eu

cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 FILE..." >&2; exit 64; }

if command -v cloud-init >/dev/null 2>&1; then
	for f in "$@"; do cloud-init schema --config-file "$f"; done
	exit 0
fi

# What `cloud-init schema` imports (cloud-init 22.4, Debian 12).
modules="yaml jsonschema jinja2 configobj requests jsonpatch"
packages="python3-yaml python3-jsonschema python3-jinja2 python3-configobj python3-requests python3-jsonpatch"
if ! /usr/bin/python3 -c "import $(echo "$modules" | tr ' ' ',')" 2>/dev/null; then
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "check-cloud-init: no cloud-init, and /usr/bin/python3 lacks some of: $modules (apt-get install $packages)" >&2
		exit 1
	fi
	echo "check-cloud-init: installing $packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	# shellcheck disable=SC2086 # one package per word
	apt-get install -y -qq --no-install-recommends $packages >/dev/null
fi

dir=.cache/cloud-init
if [ ! -d "$dir/usr/lib/python3/dist-packages/cloudinit" ]; then
	if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
		echo "check-cloud-init: no cloud-init on PATH: install it on a machine that is not booted by it" >&2
		exit 1
	fi
	echo "check-cloud-init: unpacking the cloud-init package into $dir" >&2
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# apt-get download warns when _apt cannot write the directory: harmless.
	(cd "$tmp" && apt-get download -qq cloud-init 2>/dev/null) ||
		{ echo "check-cloud-init: apt-get download cloud-init failed" >&2; exit 1; }
	rm -rf "$dir" && mkdir -p "$dir"
	dpkg-deb -x "$tmp"/cloud-init_*.deb "$dir"
fi
for f in "$@"; do
	PYTHONPATH="$PWD/$dir/usr/lib/python3/dist-packages" /usr/bin/python3 -m cloudinit.cmd.main schema --config-file "$f"
done
