# %postun: runs the OLD package's code on upgrade, so restarts live in
# %posttrans. On erase only reload. Must never fail.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
fi
exit 0
