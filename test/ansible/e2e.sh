#!/bin/bash
# End-to-end test of the Ansible role in examples/ansible: ansible-playbook
# runs examples/ansible/playbook.yml against two Debian 12 containers
# (systemd-nspawn, systemd as PID 1), entered with community.docker's
# nsenter connection. A test control plane on the host (the containers
# share its network) serves them; one workload-bound token serves both.
#
#   1. install an older build of the package, lay out config, .env, token
#      and CA, pass `zoneproxy check --instance`, start: both READY;
#   2. roll out the package under test with a changed .env: one host at a
#      time, each READY again (seen from outside, every 0.1s) before the
#      next is touched;
#   3. the same run again changes and restarts nothing;
#   4. a .env that `zoneproxy check` rejects stops the rollout at the first
#      host, whose instance keeps running; the second is not touched.
#
#   VERSION=<packaged version> test/ansible/e2e.sh     (root; via make e2e-ansible)
#
# Needs the .deb in dist/, bin/testcp and bin/envoy. Shares the cached
# debootstrap root of test/systemd/e2e.sh, and caches python3 for Ansible
# on top of it in .cache/e2e-ansible/. Logs of the last run are kept in
# .cache/e2e-ansible/logs/.
cd "$(dirname "$0")/../.."
repo=$(pwd)
# shellcheck source=test/systemd/lib.sh
. test/systemd/lib.sh # set -euo pipefail, helpers
e2e_inputs Ansible e2e-ansible
deb1=$repo/$deb1 # for ansible-playbook, which runs elsewhere
packaging/ensure-tools.sh debootstrap systemd-nspawn:systemd-container curl ansible-playbook:ansible-core
ansible-doc -t connection community.docker.nsenter >/dev/null 2>&1 || packaging/ensure-tools.sh ansible-galaxy:ansible
ansible-doc -t connection community.docker.nsenter >/dev/null 2>&1 ||
	die "no community.docker.nsenter connection plugin (apt-get install ansible)"

cache=$repo/.cache/e2e-ansible
work=$cache/run
logs=$cache/logs
hosts="zp-a zp-b"
for h in $hosts; do
	if mountpoint -q "$work/$h/root" 2>/dev/null; then umount "$work/$h/root"; fi
done
rm -rf "$logs" "$work"
mkdir -p "$logs" "$work"

# --- the package to upgrade from ---------------------------------------------------
v0="${VERSION}~prev"
say "building the package to upgrade from ($v0)"
build_package "$v0" dist/nfpm.yaml "$work/v0" deb
deb0="$work/v0/zoneproxy_${v0}-1_${ARCH}.deb"
[ -f "$deb0" ] || die "$deb0 was not built"

# --- root file systems: the shared pristine root + a cached python3 layer ---------------
ensure_pristine
nspawn_dir_setup
# Ansible's modules need python3, and its apt module python3-apt.
layer=$cache/python3-1
overlay_ok() {
	mkdir -p "$work/probe/"{l,u,w,m}
	mount -t overlay overlay -o "lowerdir=$work/probe/l,upperdir=$work/probe/u,workdir=$work/probe/w" "$work/probe/m" 2>/dev/null &&
		umount "$work/probe/m"
}
if overlay_ok; then overlay=1; else overlay=; fi
mounts=()
# mount_root <dir> <lower dirs>: an overlay over them, or a copy of the
# first where overlayfs is missing (then the layer is a full root).
mount_root() {
	local dir=$1 lower=$2
	mkdir -p "$dir" "$dir.upper" "$dir.ovl"
	if [ -n "$overlay" ]; then
		mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir.upper,workdir=$dir.ovl" "$dir"
		mounts+=("$dir")
	else
		rmdir "$dir"
		cp -a "${lower%%:*}" "$dir"
	fi
}
if [ ! -f "$layer/.complete" ]; then
	say "adding python3 to the root file system (cached for later runs)"
	rm -rf "$layer" "$layer.build" "$layer.build.upper" "$layer.build.ovl"
	mount_root "$layer.build" "$pristine"
	systemd-nspawn --register=no --keep-unit -q -D "$layer.build" sh -c \
		'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-apt && apt-get clean' \
		>"$logs/python3-layer.log" 2>&1 || {
		tail -n 20 "$logs/python3-layer.log" >&2
		die "installing python3 in the container's root"
	}
	if [ -n "$overlay" ]; then
		umount "$layer.build"
		mounts=()
		mv "$layer.build.upper" "$layer"
		rm -rf "$layer.build" "$layer.build.ovl"
	else
		mv "$layer.build" "$layer"
	fi
	touch "$layer/.complete"
fi

# --- the test control plane, on the host ----------------------------------------------
declare -A nspawn_of init_of
# in_ct <host> <command...>: ct in that host's container.
in_ct() { C=${init_of[$1]} ct "${@:2}"; }
testcp_pid=
cleanup() {
	set +e
	rm -f "$ports_given"
	[ -n "${poller_pid:-}" ] && kill "$poller_pid" 2>/dev/null && wait "$poller_pid" 2>/dev/null
	local stopping=()
	for h in $hosts; do
		# An egress's stop waits out kuma-cp's deregistration delay: too
		# slow for a teardown.
		[ -n "${init_of[$h]:-}" ] && in_ct "$h" systemctl kill --signal=KILL zoneproxy@edge.service 2>/dev/null
		stop_container "${nspawn_of[$h]:-}" "${init_of[$h]:-}" "$logs/journal-$h.log" &
		stopping+=($!)
	done
	wait "${stopping[@]}"
	nspawn_dir_teardown
	for m in "${mounts[@]}"; do umount "$m"; done
	[ -n "$testcp_pid" ] && kill "$testcp_pid" && wait "$testcp_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

cp_port=$(free_port)
admin_port=$(free_port)
admin="http://127.0.0.1:$admin_port"
bin/testcp --dir "$work/cp" --addr "127.0.0.1:$cp_port" --admin-addr "127.0.0.1:$admin_port" >"$logs/testcp.log" 2>&1 &
testcp_pid=$!
await 20 "test control plane" curl -fs -o /dev/null "$admin/ready"
curl -fsS -X PUT "$admin/meshes/e2e" >/dev/null
# Minted once, centrally, for the workload: both hosts get the same token.
curl -fsS -X POST "$admin/tokens/dataplane" -H 'Content-Type: application/json' \
	-d '{"mesh":"e2e","workload":"zone-proxy-e2e-egress","validFor":"1h"}' >"$work/token"

# --- two containers ----------------------------------------------------------------
declare -A ready_port_of
inventory=$work/inventory.yml
{
	echo "zoneproxy:"
	echo "  hosts:"
} >"$inventory"
for h in $hosts; do
	root=$work/$h/root
	mount_root "$root" "$layer:$pristine"
	install -m 0755 bin/envoy "$root/usr/bin/envoy"
	echo "$h" >"$root/etc/hostname" # part of the Dataplane's default name
	boot_container "$root" "$logs/boot-$h.log" -M "$h"
	nspawn_of[$h]=$nspawn_pid init_of[$h]=$C
	say "$h is up ($state)"
	ready_port_of[$h]=$(free_port)
	cat >>"$inventory" <<-EOF
		    $h:
		      ansible_nsenter_pid: $C
		      e2e_egress_port: $(free_port)
		      e2e_admin_port: $(free_port)
		      e2e_ready_port: ${ready_port_of[$h]}
	EOF
done
# What differs per host (ports: the containers share the host's network)
# goes into the .env, as the operator guide suggests; e2e_extra_env lets a
# run change it.
cat >>"$inventory" <<EOF
  vars:
    ansible_connection: community.docker.nsenter
    ansible_become: false
    ansible_python_interpreter: /usr/bin/python3
    e2e_extra_env: {}
    zoneproxy_ca_cert: "{{ lookup('ansible.builtin.file', '$work/cp/ca.pem') }}"
    zoneproxy_instances:
      - name: edge
        config:
          mesh: e2e
          role: egress
          address: 127.0.0.1
          cp-address: https://127.0.0.1:$cp_port
          envoy-binary: /usr/bin/envoy
          drain-time: 1s
          retry-initial: 500ms
          retry-max: 1s
        env: "{{ {'ZONEPROXY_EGRESS_PORT': e2e_egress_port, 'ZONEPROXY_ADMIN_PORT': e2e_admin_port,
                  'ZONEPROXY_READINESS_PORT': e2e_ready_port} | combine(e2e_extra_env) }}"
        token: "{{ lookup('ansible.builtin.file', '$work/token') }}"
EOF

# playbook <log> <ansible-playbook args...>: the example playbook, as is.
playbook() {
	local log=$1
	shift
	ANSIBLE_LOCAL_TEMP=$work/ansible-tmp ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 LC_ALL=C.UTF-8 \
		ansible-playbook -i "$inventory" examples/ansible/playbook.yml "$@" >"$log" 2>&1
}
# handled <log> <host>: the reload handler changed the host's instance.
handled() {
	awk -v want="changed: [$2] => (item=edge)" '
		/^RUNNING HANDLER \[zoneproxy : Reload zoneproxy instances\]/ { in_handler = 1; next }
		/^(TASK|PLAY|RUNNING HANDLER) / { in_handler = 0 }
		in_handler && index($0, want) == 1 { found = 1 }
		END { exit !found }' "$1"
}
# recap <log> <host>: the host's line of the play recap.
recap() { sed -n "s/^$2 *: //p" "$1"; }
main_pid() { in_ct "$1" systemctl show -P MainPID zoneproxy@edge; }
ready_code() { curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:${ready_port_of[$1]}/ready" || true; }
# stops_since <host> <epoch>: when systemd began stopping the instance, one per line.
stops_since() {
	in_ct "$1" journalctl -u zoneproxy@edge --since "@$2" -o short-unix --no-pager |
		awk '/Stopping zoneproxy@edge/ { print $1 }'
}

# --- 1: first install ---------------------------------------------------------------
say "ansible-playbook: install $v0 on both hosts"
t=$SECONDS
playbook "$logs/playbook-install.log" -e "zoneproxy_deb=$deb0" ||
	{ tail -n 40 "$logs/playbook-install.log" >&2; die "the install run failed"; }
say "installed in $((SECONDS - t))s"
for h in $hosts; do
	[ "$(ready_code "$h")" = 200 ] || die "$h: /ready is $(ready_code "$h") after the install run"
	[[ "$(in_ct "$h" zoneproxy version)" == *"$v0"* ]] || die "$h: $v0 is not installed"
	[ "$(in_ct "$h" systemctl is-enabled zoneproxy@edge)" = enabled ] || die "$h: zoneproxy@edge is not enabled"
	[ "$(in_ct "$h" stat -c '%U:%G %a' /etc/zoneproxy/tokens/edge)" = "zoneproxy:zoneproxy 600" ] ||
		die "$h: token file ownership or mode"
	[ "$(in_ct "$h" stat -c '%U:%G %a' /etc/zoneproxy/edge.env)" = "root:root 600" ] || die "$h: .env ownership or mode"
	cmp -s "$work/token" "$work/$h/root/etc/zoneproxy/tokens/edge" || die "$h: the token file is not the token"
done

# --- 2: the rolling upgrade ------------------------------------------------------------
# Outside the containers, as a load balancer would: every 0.1s, each host's /ready.
poll_ready() {
	while :; do
		for h in $hosts; do echo "$(date +%s.%N) $h $(ready_code "$h")"; done
		sleep 0.1
	done
}
poll_ready >"$logs/ready-poll.log" &
poller_pid=$!
sleep 1 # samples from before the rollout
rollout_start=$(date +%s)
say "ansible-playbook: roll out $VERSION with a changed .env, serial: 1"
t=$SECONDS
playbook "$logs/playbook-rollout.log" -e "zoneproxy_deb=$deb1" \
	-e '{"e2e_extra_env": {"ZONEPROXY_LABEL": "rollout=2"}}' ||
	{ tail -n 40 "$logs/playbook-rollout.log" >&2; die "the rollout failed"; }
rollout_took=$((SECONDS - t))
kill "$poller_pid"
wait "$poller_pid" 2>/dev/null || true
poller_pid=

for h in $hosts; do
	[[ "$(in_ct "$h" zoneproxy version)" == *"$VERSION"* ]] || die "$h: $VERSION is not installed after the rollout"
	handled "$logs/playbook-rollout.log" "$h" || die "$h: the handler did not reload zoneproxy@edge"
	in_ct "$h" grep -qx ZONEPROXY_LABEL=rollout=2 /etc/zoneproxy/edge.env || die "$h: the .env was not changed"
done
# When each host's disruption began (its first stop) and ended (the start of
# the last run of 200s from /ready): the hosts' intervals must not overlap.
declare -A first_stop back_ready
for h in $hosts; do
	first_stop[$h]=$(stops_since "$h" "$rollout_start" | head -n1)
	[ -n "${first_stop[$h]}" ] || die "$h: zoneproxy@edge was not restarted during the rollout"
	back_ready[$h]=$(awk -v h="$h" '$2 == h { if ($3 != 200) t = ""; else if (t == "") t = $1 } END { print t }' "$logs/ready-poll.log")
	[ -n "${back_ready[$h]}" ] || die "$h: /ready did not end at 200"
	awk -v h="$h" -v s="${first_stop[$h]}" '$2 == h && $1 > s && $3 != 200 { f = 1 } END { exit !f }' "$logs/ready-poll.log" ||
		die "$h: /ready never left 200 after its stop at ${first_stop[$h]}: the poller saw no restart"
	say "$h: stopped at ${first_stop[$h]}, /ready 200 again from ${back_ready[$h]}"
done
read -r earlier later < <(for h in $hosts; do echo "${first_stop[$h]} $h"; done | sort -n | awk '{ printf "%s ", $2 } END { print "" }')
awk -v a="${back_ready[$earlier]}" -v b="${first_stop[$later]}" 'BEGIN { exit !(a < b) }' ||
	die "$later was stopped at ${first_stop[$later]}, before $earlier was ready again (${back_ready[$earlier]})"
[ "$earlier" = zp-a ] || die "the rollout began with $earlier, not the inventory's first host zp-a"
say "rollout in ${rollout_took}s: $earlier ready again $(awk -v a="${back_ready[$earlier]}" -v b="${first_stop[$later]}" 'BEGIN { printf "%.1f", b - a }')s before $later was stopped"

# --- 3: nothing to do, nothing done ---------------------------------------------------
declare -A pid_before
for h in $hosts; do pid_before[$h]=$(main_pid "$h"); done
say "ansible-playbook: the same run again"
playbook "$logs/playbook-again.log" -e "zoneproxy_deb=$deb1" -e '{"e2e_extra_env": {"ZONEPROXY_LABEL": "rollout=2"}}' ||
	{ tail -n 40 "$logs/playbook-again.log" >&2; die "the repeated run failed"; }
for h in $hosts; do
	[[ "$(recap "$logs/playbook-again.log" "$h")" == *" changed=0 "* ]] ||
		die "$h: the repeated run changed something: $(recap "$logs/playbook-again.log" "$h")"
	[ "$(main_pid "$h")" = "${pid_before[$h]}" ] || die "$h: the repeated run restarted zoneproxy@edge"
done

# --- 4: the gate ----------------------------------------------------------------------
say "ansible-playbook: a .env that zoneproxy check rejects"
t_gate=$(date +%s)
if playbook "$logs/playbook-gate.log" -e "zoneproxy_deb=$deb1" -e '{"e2e_extra_env": {"ZONEPROXY_DRAIN_TIMEOUT": "1s"}}'; then
	die "the run with a misspelt variable succeeded"
fi
grep -q 'did you mean ZONEPROXY_DRAIN_TIME' "$logs/playbook-gate.log" ||
	{ tail -n 40 "$logs/playbook-gate.log" >&2; die "the failed check does not name the variable meant"; }
[[ "$(recap "$logs/playbook-gate.log" zp-a)" == *" failed=1 "* ]] || die "zp-a did not fail: $(recap "$logs/playbook-gate.log" zp-a)"
[ -z "$(recap "$logs/playbook-gate.log" zp-b)" ] || die "the rollout went on to zp-b: $(recap "$logs/playbook-gate.log" zp-b)"
for h in $hosts; do
	! in_ct "$h" grep -q DRAIN_TIMEOUT /etc/zoneproxy/edge.env || die "$h: the rejected .env was left in place"
	[ -z "$(in_ct "$h" find /etc/zoneproxy -name '*~')" ] || die "$h: backups left: $(in_ct "$h" find /etc/zoneproxy -name '*~')"
	[ "$(main_pid "$h")" = "${pid_before[$h]}" ] || die "$h: zoneproxy@edge was restarted although the check failed"
	[ -z "$(stops_since "$h" "$t_gate")" ] || die "$h: zoneproxy@edge was stopped although the check failed"
	[ "$(ready_code "$h")" = 200 ] || die "$h: /ready is $(ready_code "$h") after the failed run"
done

! grep -lF "$(cat "$work/token")" "$logs"/playbook-*.log || die "the token is in ansible-playbook's output (above)"

say "PASS: Ansible e2e in ${SECONDS}s"
