# %preun: $1 = 0 on erase; $1 >= 1 is the old package during an upgrade,
# which must leave the instances alone. Must never fail.
if [ "$1" -eq 0 ]; then
	enabled=$(find /etc/systemd/system -type l -name 'zoneproxy@?*.service' -printf '%f\n' 2>/dev/null | sort -u)
	if [ -n "$enabled" ]; then
		# shellcheck disable=SC2086 # one unit name per word
		systemctl --no-reload disable $enabled >/dev/null 2>&1 || :
	fi
	if [ -d /run/systemd/system ]; then
		systemctl stop 'zoneproxy@*.service' >/dev/null 2>&1 || :
	fi
fi
exit 0
