#!/bin/bash
# End-to-end test of the .deb under a real systemd: boots Debian 12 with
# systemd as PID 1 in systemd-nspawn, installs an old-style package (the
# examples as conffiles in /etc/zoneproxy, as early snapshots did) and runs
# zoneproxy@demo against the test control plane and the Envoy stand-in:
# a boot with the instance enabled and its control plane down (boot must not
# wait for it), then the control plane and mesh appearing, watchdog, the
# upgrade to the package under test with a second instance (a zone ingress,
# zoneproxy@edge) running and a connection held open on each (old examples:
# edited kept, untouched removed), drain on stop, remove/purge, a fresh
# install, and the same upgrade through the rpm scriptlets.
#
#   VERSION=<packaged version> test/systemd/e2e.sh     (root; via make e2e-systemd)
#
# Needs the .deb and .rpm in dist/, bin/testcp and bin/envoy.
# The debootstrap root is cached in .cache/e2e-systemd/ (E2E_MIRROR picks the
# Debian mirror; default: the host's apt source). Logs of the last run are
# kept in .cache/e2e-systemd/logs/.
cd "$(dirname "$0")/../.."
repo=$(pwd)
# shellcheck source=test/systemd/lib.sh
. test/systemd/lib.sh # set -euo pipefail, helpers
e2e_inputs systemd e2e-systemd

packaging/ensure-tools.sh debootstrap systemd-nspawn:systemd-container curl

cache=$repo/.cache/e2e-systemd
work=$cache/run
logs=$cache/logs
# A run killed hard may have left its overlay mounted.
if mountpoint -q "$work/root" 2>/dev/null; then umount "$work/root"; fi
rm -rf "$logs" "$work"
mkdir -p "$logs" "$work"

# --- an older package, with the examples in /etc/zoneproxy, to upgrade from -------
# The package under test plus the three examples that snapshots before 0.0.0~git20261122222139
# installed as conffiles (%config(noreplace)), with a version below any
# other, and a binary that says so.
v0="0.0.0~~old"
old_examples="payments-egress payments-ingress backend-combined"
say "building the old package ($v0, examples in /etc/zoneproxy)"
{
	sed -n '1,/^contents:$/p' dist/nfpm.yaml
	for f in $old_examples; do
		printf '  - {src: examples/%s.yaml, dst: /etc/zoneproxy/%s.yaml, type: config|noreplace, file_info: {mode: 0644}}\n' "$f" "$f"
	done
	sed '1,/^contents:$/d' dist/nfpm.yaml
} >"$work/nfpm-v0.yaml"
for p in deb rpm; do build_package "$v0" "$work/nfpm-v0.yaml" "$work/v0" "$p"; done
deb0="$work/v0/zoneproxy_${v0}-1_${ARCH}.deb"
case "$ARCH" in amd64) rpmarch=x86_64 ;; arm64) rpmarch=aarch64 ;; *) rpmarch=$ARCH ;; esac
rpm0="$work/v0/zoneproxy-${v0}-1.${rpmarch}.rpm"
rpm1="dist/zoneproxy-${VERSION}-1.${rpmarch}.rpm"
for f in "$deb0" "$rpm0" "$rpm1"; do [ -f "$f" ] || die "$f was not built"; done

# --- root file system (cached) ---------------------------------------------------
ensure_pristine

# --- container -------------------------------------------------------------------
root=$work/root
nspawn_pid=
C=
overlay=
cleanup() {
	set +e
	rm -f "$ports_given"
	stop_container "$nspawn_pid" "$C" "$logs/journal.log"
	nspawn_dir_teardown
	[ -n "$overlay" ] && umount "$root"
	rm -rf "$root" "$work/upper" "$work/ovl"
}
trap cleanup EXIT

# A throwaway overlay over the cached root (a copy where overlayfs is missing).
mkdir -p "$root" "$work/upper" "$work/ovl"
if mount -t overlay overlay -o "lowerdir=$pristine,upperdir=$work/upper,workdir=$work/ovl" "$root" 2>/dev/null; then
	overlay=1
else
	say "copying the root file system (no overlayfs)"
	rmdir "$root"
	cp -a "$pristine" "$root"
fi
mkdir -p "$root/opt/e2e"
cp "$deb0" "$root/opt/e2e/zoneproxy-v0.deb"
cp "$deb1" "$root/opt/e2e/zoneproxy-v1.deb"
cp "$rpm0" "$root/opt/e2e/zoneproxy-v0.rpm"
cp "$rpm1" "$root/opt/e2e/zoneproxy-v1.rpm"
cp bin/testcp "$root/opt/e2e/testcp"
install -m 0755 bin/envoy "$root/usr/bin/envoy"

# --- boot ------------------------------------------------------------------------
nspawn_dir_setup

# CAP_SYS_TIME makes the container like a VM for the clock: without it
# nspawn's own seccomp filter denies adjtimex to everything inside, and only
# the unit's filter (which has no CAP_SYS_TIME) should decide.
boot() { boot_container "$root" "$logs/boot.log" --capability=CAP_SYS_TIME; }
prop() { ct systemctl show -P "$2" "$1"; }

# shutdown_container powers the container off, keeping its journal.
shutdown_container() {
	ct journalctl --no-pager -o short-precise >"$logs/journal-$1.log" 2>&1 || true
	ct systemctl poweroff >/dev/null 2>&1 || true
	for _ in $(seq 1 600); do
		kill -0 "$nspawn_pid" 2>/dev/null || break
		sleep 0.1
	done
	! kill -0 "$nspawn_pid" 2>/dev/null || die "the container did not power off within 60s"
	wait "$nspawn_pid" || true
	nspawn_pid=
	C=
}

say "booting systemd in systemd-nspawn"
boot
say "container is up ($state)"

is_state() { [ "$(prop "$1" ActiveState)" = "$2" ]; }
# Capture first: with pipefail, grep -q closing the pipe early fails it.
status_has() { [[ "$(prop "$1" StatusText)" == *"$2"* ]]; }
# Processes of the zoneproxy package still alive anywhere in the container.
leftovers() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	ct sh -c 'for p in /proc/[0-9]*; do e=$(readlink "$p/exe" 2>/dev/null) || continue
		case "$e" in /usr/bin/zoneproxy | /usr/bin/envoy) echo "${p#/proc/} $e" ;; esac; done'
}

# --- the test control plane, inside the container (network is shared) --------------
cp_port=$(free_port)
admin_port=$(free_port)
ready_port=$(free_port)
egress_port=$(free_port)
envoy_admin_port=$(free_port)
# zoneproxy@edge, the second instance during the upgrade.
ingress_port=$(free_port)
edge_admin_port=$(free_port)
edge_ready_port=$(free_port)
admin="http://127.0.0.1:$admin_port"
# The CA stays in /opt/e2e/cp; meshes and the token signing key are new on
# every start.
start_testcp() {
	ct systemd-run --quiet --unit=testcp --property=Type=exec \
		/opt/e2e/testcp --dir /opt/e2e/cp --addr "127.0.0.1:$cp_port" --admin-addr "127.0.0.1:$admin_port"
	await 20 "test control plane" curl -fs -o /dev/null "$admin/ready"
}
# issue_token [instance role] replaces the instance's token (default: demo,
# an egress) in one rename, as an operator rotating it would.
issue_token() {
	local inst=${1:-demo} role=${2:-egress}
	curl -fsS -X POST "$admin/tokens/dataplane" -H 'Content-Type: application/json' \
		-d '{"mesh":"e2e","workload":"zone-proxy-e2e-'"$role"'","validFor":"1h"}' >"$root/etc/zoneproxy/tokens/.$inst.new"
	ct chown zoneproxy: "/etc/zoneproxy/tokens/.$inst.new"
	ct chmod 0600 "/etc/zoneproxy/tokens/.$inst.new"
	ct mv -f "/etc/zoneproxy/tokens/.$inst.new" "/etc/zoneproxy/tokens/$inst"
}
start_testcp

# --- install ------------------------------------------------------------------------
say "installing $(basename "$deb0")"
ct dpkg -i /opt/e2e/zoneproxy-v0.deb >"$logs/dpkg-install.log" 2>&1 || {
	cat "$logs/dpkg-install.log" >&2
	die "dpkg -i"
}
ct id zoneproxy >/dev/null || die "no zoneproxy account after install"
out=$(ct systemd-analyze verify --man=no zoneproxy@demo.service 2>&1) || die "systemd-analyze verify: $out"
[ -z "$out" ] || die "systemd-analyze verify of the installed unit: $out"
[ -z "$(ct systemctl list-units --all --no-legend 'zoneproxy@*')" ] || die "install started an instance"
[ "$(ct stat -c '%U:%G %a' /etc/zoneproxy/tokens)" = "root:zoneproxy 750" ] || die "tokens/ ownership or mode"
[ "$(ct systemctl is-enabled zoneproxy@demo.service 2>/dev/null || true)" = disabled ] || die "instance should be disabled after install"

# --- boot with an enabled instance whose control plane is down ---------------------------
issue_token
install -m 0644 "$root/opt/e2e/cp/ca.pem" "$root/etc/zoneproxy/e2e-ca.pem"
cat >"$root/etc/zoneproxy/demo.yaml" <<EOF
mesh: e2e
role: egress
address: 127.0.0.1
cp-address: https://127.0.0.1:$cp_port
ca-cert-file: /etc/zoneproxy/e2e-ca.pem
dataplane-token-file: /etc/zoneproxy/tokens/demo
envoy-binary: /usr/bin/envoy
egress-port: $egress_port
admin-port: $envoy_admin_port
readiness-port: $ready_port
drain-time: 3s
retry-initial: 500ms
retry-max: 1s
EOF
# A short watchdog so the test can see it fire (and see it fed while the
# agent waits), and a stop timeout shorter than the drain: the stop only
# succeeds if EXTEND_TIMEOUT_USEC works.
mkdir -p "$root/etc/systemd/system/zoneproxy@demo.service.d"
printf '[Service]\nWatchdogSec=3s\nRestartSec=1s\nTimeoutStopSec=2s\n' \
	>"$root/etc/systemd/system/zoneproxy@demo.service.d/e2e.conf"
ct systemctl enable zoneproxy@demo >/dev/null 2>&1

say "rebooting with zoneproxy@demo enabled and its control plane down"
shutdown_container boot1
boot
say "container is up ($state) after a boot that started zoneproxy@demo"
[ "$(ct systemctl is-active multi-user.target || true)" = active ] || die "multi-user.target is not active"
# READY=1 came with the first wait: the instance is active, not activating.
is_state zoneproxy@demo active || die "zoneproxy@demo is '$(prop zoneproxy@demo ActiveState)' while its control plane is down (want active)"
status_has zoneproxy@demo 'waiting for the control plane' || die "STATUS= does not say what it waits for: $(prop zoneproxy@demo StatusText)"
say "status: $(prop zoneproxy@demo StatusText)"
# The unit lets the agent read the clock's NTP state (adjtimex), which
# decides whether an expired token or certificate is final.
clockline=$(ct journalctl -u zoneproxy@demo --no-pager | grep -o '"clock": "[^"]*' | head -n1)
case "$clockline" in
*'"clock": "synchronised'* | *'"clock": "not synchronised'*) say "agent reads the clock: ${clockline#*: \"}" ;;
*) die "the agent cannot read the clock's state under the unit: ${clockline:-no start line}" ;;
esac

# It keeps waiting, for more than two watchdog periods (3s), in one process.
main=$(prop zoneproxy@demo MainPID)
attempt() { prop zoneproxy@demo StatusText | sed -n 's/.*(attempt \([0-9]*\),.*/\1/p'; }
first=$(attempt)
[ -n "$first" ] || die "no attempt number in STATUS=: $(prop zoneproxy@demo StatusText)"
still_waiting() {
	local st a
	st=$(prop zoneproxy@demo ActiveState)
	[ "$st" = active ] || die "zoneproxy@demo is '$st' while waiting for its control plane"
	[ "$(prop zoneproxy@demo MainPID)" = "$main" ] || die "zoneproxy@demo restarted while waiting for its control plane"
	a=$(attempt)
	[ -n "$a" ] && [ "$a" -ge $((first + 7)) ]
}
await 60 "seven more bootstrap attempts" still_waiting
# ready_code [port]: /ready's status on the readiness port (default: demo's).
ready_code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${1:-$ready_port}/ready" || true; }
# reload_generation: the agent's generation in demo's /status (the last
# "generation" key: Envoy's, nested, comes first); 0 if it does not answer.
reload_generation() {
	local g
	g=$(curl -s "http://127.0.0.1:$ready_port/status" | tr -d '\n' | sed -n 's/.*"generation": *\([0-9]*\).*/\1/p') || true
	echo "${g:-0}"
}
[ "$(ready_code)" != 200 ] || die "/ready is 200 while the control plane is down"

say "starting the control plane; mesh \"e2e\" does not exist yet"
start_testcp
issue_token # the restarted control plane signs with a new key
await 20 "STATUS= waiting for the mesh" status_has zoneproxy@demo 'waiting for mesh "e2e"'
say "status: $(prop zoneproxy@demo StatusText)"
is_state zoneproxy@demo active || die "zoneproxy@demo is '$(prop zoneproxy@demo ActiveState)' while its mesh is missing"
[ "$(ready_code)" != 200 ] || die "/ready is 200 while waiting for the mesh"

say "creating mesh \"e2e\""
curl -fsS -X PUT "$admin/meshes/e2e" >/dev/null
ready_200() { [ "$(ready_code "$@")" = 200 ]; }
await 30 "/ready answering 200" ready_200
is_state zoneproxy@demo active || die "zoneproxy@demo is '$(prop zoneproxy@demo ActiveState)' with /ready 200"
[ "$(prop zoneproxy@demo MainPID)" = "$main" ] ||
	die "zoneproxy@demo restarted on its way to ready (MainPID $main -> $(prop zoneproxy@demo MainPID))"
[ "$(prop zoneproxy@demo NRestarts)" = 0 ] || die "zoneproxy@demo restarted $(prop zoneproxy@demo NRestarts) times"
say "ready in the same process; status: $(prop zoneproxy@demo StatusText)"

main=$(prop zoneproxy@demo MainPID)
envoy_pid=$(ct sh -c "cat /proc/$main/task/*/children" | awk '{print $1}')
[ -n "$envoy_pid" ] || die "no Envoy child under the agent ($main)"
if ct sh -c "tr '\\0' '\\n' </proc/$envoy_pid/environ" | grep -E '^(NOTIFY_SOCKET|WATCHDOG_USEC|WATCHDOG_PID)='; then
	die "Envoy inherited systemd's notify/watchdog variables"
fi
caps=$(ct sh -c "grep -E '^Cap(Eff|Amb|Bnd):' /proc/$envoy_pid/status" | awk '{print $2}' | sort -u)
[ "$caps" = 0000000000000400 ] || die "Envoy capabilities are not just CAP_NET_BIND_SERVICE: $caps"

# --- a second instance for the upgrade: a zone ingress --------------------------------------
# Its own config, token and ports, and a 30s drain: an upgrade that waited
# for its drain would show. It starts while the watchdog test runs.
issue_token edge ingress
cat >"$root/etc/zoneproxy/edge.yaml" <<EOF
mesh: e2e
role: ingress
address: 127.0.0.1
cp-address: https://127.0.0.1:$cp_port
ca-cert-file: /etc/zoneproxy/e2e-ca.pem
dataplane-token-file: /etc/zoneproxy/tokens/edge
envoy-binary: /usr/bin/envoy
ingress-port: $ingress_port
admin-port: $edge_admin_port
readiness-port: $edge_ready_port
drain-time: 30s
drain-min: 1s
EOF
ct systemctl start --no-block zoneproxy@edge

# --- watchdog ------------------------------------------------------------------------------
say "freezing Envoy: the watchdog must restart the instance"
ct sh -c "kill -STOP $envoy_pid" # minbase has no procps: the shell builtin
restarted() { [ "$(prop zoneproxy@demo NRestarts)" -ge 1 ]; }
await 30 "a watchdog restart" restarted
await 30 "zoneproxy@demo active again" is_state zoneproxy@demo active
[[ "$(ct journalctl -u zoneproxy@demo --no-pager)" == *"Watchdog timeout"* ]] || die "restart was not a watchdog timeout"
ct test ! -d "/proc/$envoy_pid" || die "frozen Envoy $envoy_pid survived the restart"
await 30 "zoneproxy@edge's /ready answering 200" ready_200 "$edge_ready_port"
is_state zoneproxy@edge active || die "zoneproxy@edge is '$(prop zoneproxy@edge ActiveState)' with /ready 200"

# --- upgrade: old examples go, edited or in use ones stay; running instances reload ---------
# Of the examples the old package put in /etc/zoneproxy: payments-egress is
# edited, payments-ingress untouched but its instance enabled (not started),
# backend-combined untouched and unused.
edit_and_enable_old_examples() {
	for f in $old_examples; do
		[ -f "$root/etc/zoneproxy/$f.yaml" ] || die "the old package did not install /etc/zoneproxy/$f.yaml"
	done
	echo "# edited by the operator" >>"$root/etc/zoneproxy/payments-egress.yaml"
	ct systemctl enable zoneproxy@payments-ingress >/dev/null 2>&1
}
# check_old_examples <saved suffix>: after the upgrade, where each one is.
check_old_examples() {
	local etc=$root/etc/zoneproxy
	[ ! -e "$etc/payments-egress.yaml" ] || die "upgrade left the edited example in place (want it as payments-egress.yaml$1)"
	[ "$(tail -n1 "$etc/payments-egress.yaml$1" 2>/dev/null)" = "# edited by the operator" ] ||
		die "upgrade lost the edited example (no payments-egress.yaml$1 with the edit)"
	cmp -s "$etc/payments-ingress.yaml" examples/payments-ingress.yaml ||
		die "upgrade removed or changed payments-ingress.yaml, which an enabled instance reads"
	[ ! -e "$etc/backend-combined.yaml" ] || die "upgrade left the untouched example backend-combined.yaml"
	is_state zoneproxy@payments-ingress inactive || die "upgrade started zoneproxy@payments-ingress"
	[ -f "$root/usr/share/doc/zoneproxy/examples/two-meshes/billing-egress.yaml" ] || die "no examples in /usr/share/doc/zoneproxy"
}
# A connection held open on each instance's zone listener, from this shell
# (the container shares the host's network). client_hello <sni> is a
# minimal TLS 1.2 ClientHello naming sni: the listener's tls_inspector
# needs it before the socket is a connection on the listener's filter chain,
# which the stand-in then holds until the client closes it (a bare connect
# is closed after 15 s). The SNIs are test/controlplane's DestinationSNI.
bytes() { printf '%b' "$(printf '%s' "$*" | tr -d ' ' | sed 's/../\\x&/g')"; } # from hex digits
client_hello() {
	local n=${#1}
	bytes 16 0301 "$(printf %04x $((n + 56)))" # handshake record
	bytes 01 00 "$(printf %04x $((n + 52)))"   # ClientHello, 24-bit length
	bytes 0303 "$(printf %064d 0)"             # TLS 1.2, random
	bytes 00 0002 002f 01 00                   # no session id, one cipher suite, no compression
	bytes "$(printf '%04x 0000 %04x %04x 00 %04x' $((n + 9)) $((n + 5)) $((n + 3)) "$n")" # extensions: server_name
	printf '%s' "$1"
}
# zone_conns <instance>: the connections Envoy counts on its zone listener.
zone_conns() {
	curl -fsS --unix-socket "/proc/$C/root/run/zoneproxy/$1/kuma-envoy-admin.sock" \
		'http://envoy/stats?filter=downstream_cx_active' |
		sed -n 's/^listener\.self_zone[a-z]*_dp_[^.]*\.downstream_cx_active: //p'
}
envoy_holds_one() { [ "$(zone_conns "$1")" = 1 ]; }
# hold <instance> <port> <sni>: opens the connection (its fd in held_fd)
# and waits until Envoy counts it.
hold() {
	exec {held_fd}<>"/dev/tcp/127.0.0.1/$2" || die "cannot connect to $1's zone listener"
	client_hello "$3" >&"$held_fd"
	await 10 "$1's Envoy to count the held connection" envoy_holds_one "$1"
}
# still_held <instance> <fd> <port>: ESTABLISHED here, Envoy still counts
# it, no EOF has come (a read times out) and a write goes through.
still_held() {
	local rc=0
	[[ "$(ss -Htnp state established "( dport = :$3 )")" == *"pid=$$,fd=$2)"* ]] ||
		die "$1's held connection is not ESTABLISHED"
	envoy_holds_one "$1" || die "$1's Envoy counts $(zone_conns "$1") connections on its zone listener, not the held one"
	read -r -t 0.2 -n 1 -u "$2" _ || rc=$? # no byte comes: only EOF or the timeout
	[ "$rc" -gt 128 ] || die "$1's held connection was closed (read exit $rc)"
	printf x >&"$2" || die "cannot write on $1's held connection"
}
envoy_of() { ct sh -c "cat /proc/$1/task/*/children" | awk '{print $1}'; }

say "upgrading from $v0 to $VERSION while zoneproxy@demo and zoneproxy@edge run, a connection held on each"
edit_and_enable_old_examples
hold demo "$egress_port" sni.extsvc.e2e.default.httpbin.80
demo_conn=$held_fd
hold edge "$ingress_port" sni.msvc.e2e.default.backend.http
edge_conn=$held_fd
before=$(prop zoneproxy@demo MainPID)
envoy_before=$(envoy_of "$before")
edge_before=$(prop zoneproxy@edge MainPID)
edge_envoy_before=$(envoy_of "$edge_before")
[ -n "$edge_envoy_before" ] || die "no Envoy child under zoneproxy@edge's agent ($edge_before)"
upgrade_started=$SECONDS
ct env DEBIAN_FRONTEND=noninteractive dpkg -i /opt/e2e/zoneproxy-v1.deb >"$logs/dpkg-upgrade.log" 2>&1 || {
	cat "$logs/dpkg-upgrade.log" >&2
	die "dpkg -i (upgrade)"
}
dpkg_took=$((SECONDS - upgrade_started))
# Far below edge's 30s drain: the postinst reloads, it does not wait for drains.
[ "$dpkg_took" -lt 15 ] || die "dpkg -i took ${dpkg_took}s with two instances running: it waited for a drain"
# shellcheck disable=SC2016 # a dpkg-query format, not a variable
[ "$(ct dpkg-query -W -f '${Version}' zoneproxy)" = "$VERSION-1" ] || die "upgrade did not install $VERSION-1"
check_old_examples .dpkg-bak
await 30 "zoneproxy@demo active after the upgrade" is_state zoneproxy@demo active
after=$(prop zoneproxy@demo MainPID)
# Reloaded in place: the same process runs the new binary, Envoy untouched.
[ "$after" = "$before" ] || die "upgrade restarted zoneproxy@demo instead of reloading it (MainPID $before -> $after)"
[ "$(envoy_of "$after")" = "$envoy_before" ] || die "upgrade replaced Envoy $envoy_before ($(envoy_of "$after") now)"
[ "$(ready_code)" = 200 ] || die "/ready is $(ready_code) after the upgrade"
[ "$(ct readlink "/proc/$after/exe")" = /usr/bin/zoneproxy ] || die "the agent does not run the upgraded binary"
status_has zoneproxy@demo 'agent generation 2' || die "STATUS= does not name the reloaded generation: $(prop zoneproxy@demo StatusText)"
# The second instance too, in the same process with the same Envoy.
is_state zoneproxy@edge active || die "zoneproxy@edge is '$(prop zoneproxy@edge ActiveState)' after the upgrade"
edge_after=$(prop zoneproxy@edge MainPID)
[ "$edge_after" = "$edge_before" ] || die "upgrade restarted zoneproxy@edge instead of reloading it (MainPID $edge_before -> $edge_after)"
[ "$(envoy_of "$edge_after")" = "$edge_envoy_before" ] || die "upgrade replaced zoneproxy@edge's Envoy $edge_envoy_before ($(envoy_of "$edge_after") now)"
[ "$(ready_code "$edge_ready_port")" = 200 ] || die "zoneproxy@edge's /ready is $(ready_code "$edge_ready_port") after the upgrade"
status_has zoneproxy@edge 'agent generation 2' || die "zoneproxy@edge's STATUS= does not name the reloaded generation: $(prop zoneproxy@edge StatusText)"
still_held demo "$demo_conn" "$egress_port"
still_held edge "$edge_conn" "$ingress_port"
say "upgrade reloaded both instances in place, held connections open; dpkg -i took ${dpkg_took}s; status: $(prop zoneproxy@demo StatusText)"
# systemctl reload and SIGHUP (systemd's, and config management's) reload too.
for i in demo edge; do
	ct systemctl reload "zoneproxy@$i" || die "systemctl reload zoneproxy@$i"
	status_has "zoneproxy@$i" 'agent generation 3' || die "systemctl reload zoneproxy@$i: STATUS= $(prop "zoneproxy@$i" StatusText)"
done
ct systemctl kill --kill-whom=main --signal=SIGHUP zoneproxy@demo zoneproxy@edge
await 30 "SIGHUP to reload zoneproxy@demo" status_has zoneproxy@demo 'agent generation 4'
await 30 "SIGHUP to reload zoneproxy@edge" status_has zoneproxy@edge 'agent generation 4'
# Once kuma-cp takes its stream again, each program compares the running
# Envoy with the one it would start (build, launch, bootstrap): an upgrade
# of the agent alone keeps Envoy, so no handover follows.
envoy_checked() { [[ "$(ct journalctl -u "zoneproxy@$1" --no-pager -o cat)" == *"the running Envoy is as this program would start it"* ]]; }
for i in demo edge; do
	await 60 "zoneproxy@$i's check of its Envoy after the reloads" envoy_checked "$i"
	[[ "$(ct journalctl -u "zoneproxy@$i" --no-pager -o cat)" != *"a new Envoy took over"* ]] ||
		die "an upgrade of the agent alone replaced zoneproxy@$i's Envoy"
done
if [ "$(prop zoneproxy@demo MainPID)" != "$before" ] || [ "$(envoy_of "$before")" != "$envoy_before" ] ||
	[ "$(prop zoneproxy@edge MainPID)" != "$edge_before" ] || [ "$(envoy_of "$edge_before")" != "$edge_envoy_before" ]; then
	die "a reload restarted an agent or Envoy"
fi
still_held demo "$demo_conn" "$egress_port"
still_held edge "$edge_conn" "$ingress_port"
[[ "$(ct /usr/bin/zoneproxy version)" == *"$VERSION"* ]] || die "new binary not installed"
[ "$(ct systemctl list-units --state=active --no-legend --plain 'zoneproxy@*' | awk '{print $1}' | xargs)" = "zoneproxy@demo.service zoneproxy@edge.service" ] ||
	die "upgrade touched other instances"
# Done with the second instance: without its connection, its drain ends early.
exec {demo_conn}>&- {edge_conn}>&-
ct systemctl stop zoneproxy@edge
[ "$(prop zoneproxy@edge Result)" = success ] || die "zoneproxy@edge stop result $(prop zoneproxy@edge Result)"
ct systemctl disable zoneproxy@payments-ingress >/dev/null 2>&1
# A later upgrade (here: the same version again) leaves the kept example
# alone although its instance is no longer enabled. zoneproxy@demo is
# drained for maintenance meanwhile: the upgrade must leave it drained, its
# agent and Envoy as they are, and say so.
# As an operator does it: `zoneproxy drain --instance` from a root shell
# finds the unit's agent in the unit's work dir.
ct zoneproxy drain --instance demo >"$logs/drain.log" 2>&1 || {
	cat "$logs/drain.log" >&2
	die "zoneproxy drain --instance demo"
}
await 30 "zoneproxy@demo drained for maintenance" status_has zoneproxy@demo 'drained for maintenance'
drained_main=$(prop zoneproxy@demo MainPID)
drained_envoy=$(envoy_of "$drained_main")
ct env DEBIAN_FRONTEND=noninteractive dpkg -i /opt/e2e/zoneproxy-v1.deb >"$logs/dpkg-reinstall.log" 2>&1 || {
	cat "$logs/dpkg-reinstall.log" >&2
	die "dpkg -i (reinstall)"
}
cmp -s "$root/etc/zoneproxy/payments-ingress.yaml" examples/payments-ingress.yaml ||
	die "a later upgrade removed payments-ingress.yaml, kept in place by the first one"
# shellcheck disable=SC2016 # the backquotes are the message's
left_drained='zoneproxy@demo: left on the old version: drained for maintenance; run `zoneproxy undrain --instance demo`, then `systemctl reload zoneproxy@demo`'
journal_says_left() { [[ "$(ct journalctl -t zoneproxy-upgrade --no-pager -o cat)" == *"$left_drained"* ]]; }
await 10 "the journal to name zoneproxy@demo as left drained" journal_says_left
grep -qF "$left_drained" "$logs/dpkg-reinstall.log" || die "dpkg's output does not name zoneproxy@demo as left drained"
[ "$(prop zoneproxy@demo MainPID)" = "$drained_main" ] ||
	die "the upgrade restarted the drained zoneproxy@demo (MainPID $drained_main -> $(prop zoneproxy@demo MainPID))"
[ "$(envoy_of "$drained_main")" = "$drained_envoy" ] || die "the upgrade replaced the drained zoneproxy@demo's Envoy"
if [ "$(ready_code)" != 503 ] || ! status_has zoneproxy@demo 'drained for maintenance'; then
	die "the upgrade ended zoneproxy@demo's drain: /ready $(ready_code), STATUS= $(prop zoneproxy@demo StatusText)"
fi
say "the upgrade left the drained zoneproxy@demo drained, in the same agent and Envoy"
ct zoneproxy undrain --instance demo >"$logs/undrain.log" 2>&1 || {
	cat "$logs/undrain.log" >&2
	die "zoneproxy undrain --instance demo"
}
await 30 "zoneproxy@demo's /ready answering 200 after the undrain" ready_200
ct systemctl reload zoneproxy@demo || die "systemctl reload zoneproxy@demo after the undrain"
await 30 "zoneproxy@demo active after the reinstall" is_state zoneproxy@demo active
# Until the reloaded agent has seen the Envoy it took over answer ready, a
# stop ends Envoy without a drain: wait for that before the drain test.
settled() { ! status_has "$1" 'took over the running Envoy'; }
await 10 "the reloaded zoneproxy@demo to see Envoy ready" settled zoneproxy@demo

# --- a restart is not a stop ---------------------------------------------------------------
# At the stop signal the agent asks systemd over D-Bus (the system bus, as
# the unit's sandbox allows) for the unit's job: `systemctl restart` keeps
# the egress in kuma-cp's egress set, `systemctl stop` withdraws it first.
said() { ct journalctl -u zoneproxy@demo --no-pager -o cat | grep -cF "$1" || true; }
restart_line="restart: the egress stays in kuma-cp's egress set"
stop_line="stop: withdrawing the zone egress from kuma-cp's egress set first"
restarts_before=$(said "$restart_line")
stops_before=$(said "$stop_line")
main_before=$(prop zoneproxy@demo MainPID)
t0=$SECONDS
ct systemctl restart zoneproxy@demo || die "systemctl restart zoneproxy@demo"
await 30 "zoneproxy@demo's /ready answering 200 after the restart" ready_200
[ "$(prop zoneproxy@demo MainPID)" != "$main_before" ] || die "systemctl restart did not restart zoneproxy@demo"
[ "$(said "$restart_line")" -gt "$restarts_before" ] ||
	die "systemctl restart was not told apart from a stop: $(ct journalctl -u zoneproxy@demo --no-pager -o cat -n 30)"
[ "$(said "$stop_line")" = "$stops_before" ] || die "systemctl restart withdrew the egress"
[[ "$(ct journalctl -u zoneproxy@demo --no-pager -o cat)" != *"cannot ask systemd whether this stop is a restart"* ]] ||
	die "the agent could not ask systemd over D-Bus"
say "systemctl restart kept the egress in the egress set, serving again after $((SECONDS - t0))s"

# An open downstream connection, or the agent ends the drain at once.
exec 3<>"/dev/tcp/127.0.0.1/$egress_port" || die "cannot connect to the egress listener"
say "stopping zoneproxy@demo with a connection open (3s drain, TimeoutStopSec=2s)"
t0=$SECONDS
ct systemctl stop --no-block zoneproxy@demo
await 10 "STATUS= draining" status_has zoneproxy@demo 'draining'
say "status: $(prop zoneproxy@demo StatusText)"
await 40 "zoneproxy@demo inactive" is_state zoneproxy@demo inactive
took=$((SECONDS - t0))
exec 3<&-
[ "$took" -ge 2 ] || die "stop took ${took}s: no drain"
[ "$(prop zoneproxy@demo Result)" = success ] || die "stop result $(prop zoneproxy@demo Result)"
[ "$(prop zoneproxy@demo ExecMainStatus)" = 0 ] || die "agent exited $(prop zoneproxy@demo ExecMainStatus)"
[ -z "$(leftovers)" ] || die "processes left after stop: $(leftovers)"
[ ! -e "$root/run/zoneproxy/demo" ] || die "runtime directory left after stop"
[ "$(said "$stop_line")" -gt "$stops_before" ] || die "systemctl stop did not say it withdraws the egress"
say "stopped in ${took}s, exit 0, no processes left"

# --- remove stops instances; purge removes state ---------------------------------------------
ct systemctl start zoneproxy@demo # enabled since the reboot
await 30 "zoneproxy@demo active (enabled)" is_state zoneproxy@demo active
[ -d "$root/var/lib/zoneproxy/demo" ] || die "no state directory"
# The unit's StateDirectory= is where run keeps its last-known-good
# configuration and Envoy's version, with no --state-dir given.
lkg=$root/var/lib/zoneproxy/demo/xds/xds-lkg
cached() { [ -f "$lkg" ]; }
await 30 "the last-known-good cache in StateDirectory" cached
[ "$(stat -c %a "$lkg")" = 600 ] || die "the cache is mode $(stat -c %a "$lkg"), want 600"
[ -f "$root/var/lib/zoneproxy/demo/envoy-version.json" ] || die "no envoy-version.json in StateDirectory"
say "removing the package while zoneproxy@demo runs"
ct dpkg -r zoneproxy >"$logs/dpkg-remove.log" 2>&1 || {
	cat "$logs/dpkg-remove.log" >&2
	die "dpkg -r"
}
is_state zoneproxy@demo inactive || die "remove left zoneproxy@demo $(prop zoneproxy@demo ActiveState)"
[ -z "$(leftovers)" ] || die "processes left after remove: $(leftovers)"
say "purging"
ct dpkg -P zoneproxy >"$logs/dpkg-purge.log" 2>&1 || {
	cat "$logs/dpkg-purge.log" >&2
	die "dpkg -P"
}
[ ! -e "$root/var/lib/zoneproxy" ] || die "purge left /var/lib/zoneproxy"
# dpkg purges what the package once shipped: the kept old examples too.
[ ! -e "$root/etc/zoneproxy/payments-egress.yaml.dpkg-bak" ] || die "purge left payments-egress.yaml.dpkg-bak"
[ ! -e "$root/etc/zoneproxy/payments-ingress.yaml" ] || die "purge left the obsolete conffile payments-ingress.yaml"
[ -z "$(find "$root/etc/systemd/system" -name 'zoneproxy@*.service' -type l)" ] || die "purge left enablement links"
[ -f "$root/etc/zoneproxy/demo.yaml" ] || die "purge removed the operator's own config"
ct id zoneproxy >/dev/null || die "purge removed the account (it must stay)"

# --- a fresh install of the package under test puts nothing in /etc/zoneproxy ------------
say "installing $(basename "$deb1") afresh"
etc_before=$(cd "$root/etc/zoneproxy" && find . | sort)
ct dpkg -i /opt/e2e/zoneproxy-v1.deb >"$logs/dpkg-install-v1.log" 2>&1 || {
	cat "$logs/dpkg-install-v1.log" >&2
	die "dpkg -i (fresh)"
}
etc_after=$(cd "$root/etc/zoneproxy" && find . | sort)
[ "$etc_after" = "$(printf '%s\n./tokens\n' "$etc_before" | sort -u)" ] ||
	die "install put more than tokens/ in /etc/zoneproxy: $(comm -13 <(echo "$etc_before") <(echo "$etc_after") | tr '\n' ' ')"
[ "$(ct stat -c '%U:%G %a' /etc/zoneproxy/tokens)" = "root:zoneproxy 750" ] || die "tokens/ ownership or mode"
# shellcheck disable=SC2016 # a dpkg-query format, not a variable
[ -z "$(ct dpkg-query -W -f '${Conffiles}' zoneproxy)" ] || die "the package has conffiles"
# The complaint this fixes: an example started as a zone proxy.
! ct systemctl start zoneproxy@payments-egress >/dev/null 2>&1 || die "zoneproxy@payments-egress started from nothing"
[ -z "$(ct systemctl list-units --state=active --no-legend 'zoneproxy@*')" ] || die "an instance is running after a fresh install"
ct dpkg -P zoneproxy >"$logs/dpkg-purge-v1.log" 2>&1 || {
	cat "$logs/dpkg-purge-v1.log" >&2
	die "dpkg -P (fresh)"
}

# --- the rpm scriptlets under the same systemd -----------------------------------------------
say "rpm: install $v0, upgrade to $VERSION while running, erase"
ct userdel zoneproxy
if ct getent group zoneproxy >/dev/null; then ct groupdel zoneproxy; fi
# --nodeps: the rpm database on Debian knows nothing of useradd's package.
ct rpm -ivh --nodeps /opt/e2e/zoneproxy-v0.rpm >"$logs/rpm-install.log" 2>&1 || {
	cat "$logs/rpm-install.log" >&2
	die "rpm -ivh"
}
ct id zoneproxy >/dev/null || die "rpm %pre did not create the account"
[ "$(ct stat -c '%U:%G %a' /etc/zoneproxy/tokens)" = "root:zoneproxy 750" ] || die "rpm: tokens/ ownership or mode"
[ -z "$(ct systemctl list-units --all --no-legend 'zoneproxy@*')" ] || die "rpm install started an instance"
ct chown zoneproxy: /etc/zoneproxy/tokens/demo # the account's uid is new
ct systemctl enable --now zoneproxy@demo >/dev/null 2>&1
await 30 "zoneproxy@demo active (rpm)" is_state zoneproxy@demo active
# Serving, so that %posttrans reloads it rather than finding Envoy starting.
await 60 "zoneproxy@demo's /ready answering 200 (rpm)" ready_200
edit_and_enable_old_examples
before=$(prop zoneproxy@demo MainPID)
generation_before=$(reload_generation)
ct rpm -Uvh --nodeps /opt/e2e/zoneproxy-v1.rpm >"$logs/rpm-upgrade.log" 2>&1 || {
	cat "$logs/rpm-upgrade.log" >&2
	die "rpm -Uvh"
}
check_old_examples .rpmsave
[ -z "$(find "$root/etc/zoneproxy" -name '*.rpm-keep')" ] || die "rpm upgrade left a .rpm-keep copy"
# %posttrans reloads in place, as the deb's postinst does: the same agent
# process runs the new binary as the next generation.
reloaded_by_rpm() { [ "$(reload_generation)" -gt "$generation_before" ]; }
await 60 "rpm %posttrans to reload zoneproxy@demo (generation $generation_before -> next)" reloaded_by_rpm
is_state zoneproxy@demo active || die "zoneproxy@demo is '$(prop zoneproxy@demo ActiveState)' after the rpm upgrade"
after=$(prop zoneproxy@demo MainPID)
[ "$after" = "$before" ] || die "rpm %posttrans restarted zoneproxy@demo instead of reloading it (MainPID $before -> $after)"
[ "$(ct readlink "/proc/$after/exe")" = /usr/bin/zoneproxy ] || die "the agent does not run the upgraded binary after the rpm upgrade"
[[ "$(ct /usr/bin/zoneproxy version)" == *"$VERSION"* ]] || die "rpm upgrade did not install the new binary"
ct rpm -e zoneproxy >"$logs/rpm-erase.log" 2>&1 || {
	cat "$logs/rpm-erase.log" >&2
	die "rpm -e"
}
is_state zoneproxy@demo inactive || die "rpm -e left zoneproxy@demo $(prop zoneproxy@demo ActiveState)"
[ -z "$(leftovers)" ] || die "processes left after rpm -e: $(leftovers)"
[ -z "$(find "$root/etc/systemd/system" -name 'zoneproxy@*.service' -type l)" ] || die "rpm -e left the instance enabled"
[ -f "$root/etc/zoneproxy/payments-egress.yaml.rpmsave" ] || die "rpm -e removed the saved payments-egress.yaml.rpmsave"
[ -f "$root/etc/zoneproxy/payments-ingress.yaml" ] || die "rpm -e removed the kept payments-ingress.yaml"
[ ! -e "$root/usr/bin/zoneproxy" ] || die "rpm -e left the binary"
[ ! -e "$root/usr/share/doc/zoneproxy" ] || die "rpm -e left /usr/share/doc/zoneproxy"

say "PASS: systemd e2e in ${SECONDS}s"
