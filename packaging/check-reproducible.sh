#!/bin/sh
# Builds the packages twice from the same binary and SOURCE_DATE_EPOCH and
# requires identical bytes.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PKG_OUT="$tmp/a" packaging/build-packages.sh >/dev/null
PKG_OUT="$tmp/b" packaging/build-packages.sh >/dev/null
for f in "$tmp"/a/*; do
	cmp "$f" "$tmp/b/$(basename "$f")" || { echo "check-reproducible: $(basename "$f") differs" >&2; exit 1; }
	echo "check-reproducible: ok: $(basename "$f") $(sha256sum <"$f" | cut -c1-16)"
done
