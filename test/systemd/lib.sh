# Shell helpers for the tests that boot Debian with systemd in
# systemd-nspawn (test/systemd/e2e.sh, test/ansible/e2e.sh). Sourced, after
# `cd` to the repository root; callers set `logs`.
# shellcheck shell=bash

set -euo pipefail
trap 'echo "$0: line $LINENO: command failed (exit $?)" >&2' ERR

say() { printf '\033[1m==> [%3ds] %s\033[0m\n' "$SECONDS" "$*"; }
die() {
	printf '\033[1;31mFAIL: %s\033[0m\n' "$*" >&2
	exit 1
}

# await <seconds> <description> <command...>: poll until the command succeeds.
await() {
	local t=$1 what=$2
	shift 2
	local end=$((SECONDS + t))
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || die "timed out after ${t}s waiting for: $what"
		sleep 0.2
	done
}

# e2e_inputs <test> <make target>: it boots containers, so root only. A
# developer's `make test` as a normal user says so and goes on (exit 0);
# CI runs as root, so it always runs there. Sets VERSION, ARCH and deb1
# (the package under test) and checks what the make target builds.
e2e_inputs() {
	if [ "$(id -u)" -ne 0 ]; then
		printf '\033[1;33mSKIP: the %s e2e needs root (systemd-nspawn, debootstrap); run "sudo make %s" to include it\033[0m\n' "$1" "$2" >&2
		exit 0
	fi
	VERSION=$(packaging/version.sh)
	ARCH=${ARCH:-amd64}
	deb1="dist/zoneproxy_${VERSION}-1_${ARCH}.deb"
	local f
	for f in "$deb1" dist/nfpm.yaml bin/testcp bin/envoy; do
		[ -f "$f" ] || die "$f is missing (make $2 builds it)"
	done
}

# Ports handed out so far: a port the kernel gives back free can be the
# one the last call gave, which would make two settings share it.
ports_given=$(mktemp)
free_port() {
	local p
	for _ in 1 2 3 4 5 6 7 8; do
		p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
			shuf -i 20000-60000 -n 1)
		grep -qx "$p" "$ports_given" || break
	done
	echo "$p" >>"$ports_given"
	echo "$p"
}

# The debootstrap root both tests start from, cached. Bump the suffix when
# the package list below changes.
pristine=$(pwd)/.cache/e2e-systemd/bookworm-2

# ensure_pristine makes $pristine unless a complete one is cached
# (E2E_MIRROR picks the Debian mirror; default: the host's apt source).
ensure_pristine() {
	[ ! -f "$pristine/.complete" ] || return 0
	local mirror=${E2E_MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)}
	if [ -z "$mirror" ]; then
		mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
	fi
	mirror=${mirror:-http://deb.debian.org/debian}
	say "debootstrap bookworm from $mirror (cached for later runs)"
	rm -rf "$pristine" "$pristine.tmp"
	mkdir -p "$(dirname "$pristine")"
	# rpm: to run the rpm scriptlets under the same systemd.
	debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,passwd,rpm \
		bookworm "$pristine.tmp" "$mirror" >"${logs:?}/debootstrap.log" 2>&1 ||
		{
			tail -n 20 "$logs/debootstrap.log" >&2
			die "debootstrap"
		}
	echo e2e >"$pristine.tmp/etc/hostname"
	touch "$pristine.tmp/.complete"
	mv "$pristine.tmp" "$pristine"
}

# nspawn refuses a non-tmpfs /run/systemd/nspawn; there is no host bus, hence
# --register=no --keep-unit. Never create /run/systemd/system on the host: the
# maintainer scripts read it as "systemd is running".
mounted_nspawn_tmpfs=
created_nspawn_dir=
nspawn_dir_setup() {
	if [ ! -d /run/systemd/nspawn ]; then
		mkdir -p /run/systemd/nspawn
		created_nspawn_dir=1
	fi
	if ! mountpoint -q /run/systemd/nspawn; then
		mount -t tmpfs tmpfs /run/systemd/nspawn
		mounted_nspawn_tmpfs=1
	fi
}
nspawn_dir_teardown() {
	[ -n "$mounted_nspawn_tmpfs" ] && umount /run/systemd/nspawn
	[ -n "$created_nspawn_dir" ] && rmdir /run/systemd/nspawn
	mounted_nspawn_tmpfs=
	created_nspawn_dir=
}

# ct runs a command inside the container whose PID 1 is $C, with a clean
# environment.
ct() { nsenter -t "$C" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# boot_container <root> <log> [nspawn options...] starts systemd in <root>
# and waits until boot is over (is-system-running leaves "starting"). Sets
# C (the container's PID 1), nspawn_pid and state. The ceiling is below
# the unit's TimeoutStartSec (90s): an instance that held up boot until its
# start timed out fails here.
boot_container() {
	local dir=$1 log=$2
	shift 2
	systemd-nspawn --register=no --keep-unit "$@" -D "$dir" -b --console=read-only >>"$log" 2>&1 &
	nspawn_pid=$!
	# The container's PID 1 is nspawn's child named systemd; on a first boot
	# nspawn may have short-lived helper children before it.
	C=""
	for _ in $(seq 1 300); do
		for c in $(pgrep -P "$nspawn_pid" || true); do
			[ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ] && C=$c
		done
		[ -n "$C" ] && break
		kill -0 "$nspawn_pid" 2>/dev/null || {
			cat "$log" >&2
			die "systemd-nspawn exited"
		}
		sleep 0.1
	done
	[ -n "$C" ] || die "no container PID 1"

	local end=$((SECONDS + 60))
	state=""
	while [ "$SECONDS" -lt "$end" ]; do
		state=$(ct systemctl is-system-running 2>>"${logs:?}/is-system-running.log" || true)
		case "$state" in running | degraded) break ;; esac
		sleep 0.1
	done
	case "$state" in
		running) ;;
		degraded) ct systemctl --failed --no-legend >&2 || true ;;
		*)
			ct systemctl list-jobs --no-pager >&2 || true
			die "container did not finish booting within 60s (state '$state')"
			;;
	esac
}

# stop_container <nspawn pid> <container PID 1> <journal file>: powers the
# container off (keeping its journal), killing it after 10s.
stop_container() {
	local pid=$1 init=$2
	if [ -n "$init" ] && [ -d "/proc/$init" ]; then
		C=$init ct journalctl --no-pager -o short-precise >"$3" 2>&1
		C=$init ct systemctl poweroff >/dev/null 2>&1
	fi
	[ -n "$pid" ] || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

# build_package <version> <nfpm.yaml> <out dir> <deb|rpm>: the package of
# this source tree under another version, with a binary that says so.
build_package() {
	local version=$1 spec=$2 out=$3 packager=$4
	local bin=$out/zoneproxy-$version
	mkdir -p "$out"
	[ -f "$bin" ] || CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/zoneproxy/zoneproxy/pkg/version.Version=$version" \
		-o "$bin" ./cmd/zoneproxy
	VERSION=$version ARCH=${ARCH:-amd64} ZONEPROXY_BIN=$bin SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0} \
		go tool -modfile=tools/go.mod nfpm package -f "$spec" -p "$packager" -t "$out/" >>"${logs:?}/nfpm-$version.log" 2>&1 ||
		{
			cat "$logs/nfpm-$version.log" >&2
			die "nfpm ($packager, $version)"
		}
}
