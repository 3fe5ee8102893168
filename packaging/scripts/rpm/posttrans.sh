# %posttrans: the NEW package's code, once per install or upgrade. Reloads
# each running instance in place (`zoneproxy reload`: Envoy and its
# connections stay). Only one that cannot reload at all (exit 69) restarts,
# without rpm waiting for its drain; one drained for maintenance, or whose
# reload is refused on purpose (exit 75), is left on the old version, as
# the journal says. On a fresh install nothing runs, so it does nothing.

# note MESSAGE: to rpm's output and the journal.
note() {
	echo "$1" >&2
	logger -t zoneproxy-upgrade -p daemon.notice -- "$1" 2>/dev/null || :
}

# upgrade_instance UNIT: reload it; restart it only if it cannot reload.
upgrade_instance() {
	instance=${1%.service}
	case "$(systemctl show -p StatusText "$1" 2>/dev/null)" in
		*"for maintenance"*)
			note "$instance: left on the old version: drained for maintenance; run \`zoneproxy undrain --instance ${instance#zoneproxy@}\`, then \`systemctl reload $instance\`"
			return 0
			;;
	esac
	systemctl reload "$1" >/dev/null 2>&1 && return 0
	# The status of ExecReload='s last run: `zoneproxy reload`'s exit code.
	case "$(systemctl show -p ExecReload "$1" 2>/dev/null | sed -n 's/.* status=\([0-9]*\).*/\1/p')" in
		69)
			note "$instance: its agent cannot reload (journalctl -u $1 says why): restarting it"
			systemctl --no-block try-restart "$1" >/dev/null 2>&1 || :
			;;
		75)
			note "$instance: left on the old version: it refused the reload (journalctl -u $1 says why); run \`systemctl reload $instance\` once that is resolved"
			;;
		*)
			note "$instance: left on the old version: its reload failed (journalctl -u $1 says why); run \`systemctl reload $instance\` or restart it"
			;;
	esac
}

# Puts back the old examples %pre kept because an instance uses them, before
# that instance restarts; an identical .rpmsave is then redundant.
for name in payments-egress payments-ingress backend-combined; do
	conffile=/etc/zoneproxy/$name.yaml
	[ -f "$conffile.rpm-keep" ] || continue
	if [ -e "$conffile" ]; then
		rm -f "$conffile.rpm-keep"
		continue
	fi
	mv -f "$conffile.rpm-keep" "$conffile" || continue
	if cmp -s "$conffile" "$conffile.rpmsave" 2>/dev/null; then
		rm -f "$conffile.rpmsave"
	fi
	echo "Kept $conffile: zoneproxy@$name is enabled or running."
done

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
	for unit in $(systemctl list-units --state=active --plain --no-legend 'zoneproxy@*.service' | awk '{print $1}'); do
		upgrade_instance "$unit"
	done
fi
exit 0
