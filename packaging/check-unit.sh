#!/bin/sh
# Static checks of the systemd unit; no running systemd needed.
#   packaging/check-unit.sh [unit] [max-score]
# Fails if `systemd-analyze verify` prints anything (it exits 0 on unknown
# keys and bad values), a setting the agent relies on is missing, or the
# offline security score exceeds max-score.
set -eu

unit=${1:-systemd/zoneproxy@.service}
max=${2:-2.0}

command -v systemd-analyze >/dev/null 2>&1 || {
	echo "check-unit: systemd-analyze not found (apt-get install systemd)" >&2
	exit 1
}
[ -f "$unit" ] || { echo "check-unit: no such unit: $unit" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# verify insists that ExecStart exists; point it at a real executable.
bin=${ZONEPROXY_BIN:-}
if [ -z "$bin" ]; then
	if [ -x bin/zoneproxy ]; then bin=$(pwd)/bin/zoneproxy; else bin=/bin/true; fi
fi
copy="$tmp/$(basename "$unit")"
sed "s#/usr/bin/zoneproxy#$bin#g" "$unit" >"$copy"

rc=0
out=$(systemd-analyze verify --man=no "$copy" 2>&1) || rc=$?
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
	echo "check-unit: systemd-analyze verify $unit (rc $rc):" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi
echo "check-unit: verify: clean"

# Settings the agent's behaviour depends on; a hardening score cannot see
# them go (dropping a capability even improves it).
for want in Type=notify NotifyAccess=main WatchdogSec=30s KillMode=mixed KillSignal=SIGTERM \
	Restart=on-failure "RestartPreventExitStatus=64 78" StartLimitIntervalSec=0 \
	AmbientCapabilities=CAP_NET_BIND_SERVICE "RuntimeDirectory=zoneproxy/%i" "StateDirectory=zoneproxy/%i"; do
	grep -qxF "$want" "$unit" || { echo "check-unit: $unit lacks the line $want" >&2; exit 1; }
done
echo "check-unit: required settings present"

# The threshold is ten times the printed score.
threshold=$(echo "$max" | awk '{ printf "%d", $1 * 10 + 0.5 }')
rc=0
out=$(systemd-analyze security --offline=yes --threshold="$threshold" "$copy" 2>&1) || rc=$?
score=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
if [ "$rc" -ne 0 ] || [ -z "$score" ]; then
	printf '%s\n' "$out" >&2
	echo "check-unit: security exposure ${score:-unknown} exceeds $max (rc $rc)" >&2
	exit 1
fi
echo "check-unit: security exposure $score (limit $max)"
