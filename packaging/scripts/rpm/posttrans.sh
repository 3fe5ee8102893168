# %posttrans: the NEW package's code, once per install or upgrade. Restarts
# only running instances, so on a fresh install it does nothing.

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
	systemctl try-restart 'zoneproxy@*.service' >/dev/null 2>&1 || :
fi
exit 0
