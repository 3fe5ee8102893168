# %posttrans: the NEW package's code, once per install or upgrade. Restarts
# only running instances, so on a fresh install it does nothing.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
	systemctl try-restart 'zoneproxy@*.service' >/dev/null 2>&1 || :
fi
exit 0
