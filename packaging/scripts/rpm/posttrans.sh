# %posttrans: the NEW package's code, once per install or upgrade. Reloads
# each running instance in place (`zoneproxy reload`: Envoy and its
# connections stay); one that cannot reload restarts without rpm waiting for
# its drain. On a fresh install nothing runs, so it does nothing.

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
		systemctl reload "$unit" >/dev/null 2>&1 ||
			systemctl --no-block try-restart "$unit" >/dev/null 2>&1 || :
	done
fi
exit 0
