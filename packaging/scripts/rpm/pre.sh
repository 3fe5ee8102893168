# %pre: the account must exist before unpack (/etc/zoneproxy/tokens is
# group-owned by it). Never deleted. POSIX sh: rpm runs the body with /bin/sh.
getent group zoneproxy >/dev/null 2>&1 || groupadd --system zoneproxy
if ! getent passwd zoneproxy >/dev/null 2>&1; then
	nologin=/sbin/nologin
	[ -x "$nologin" ] || nologin=/usr/sbin/nologin
	useradd --system --gid zoneproxy --no-create-home --home-dir /var/lib/zoneproxy \
		--shell "$nologin" --comment "Kuma zone proxy" zoneproxy
fi
exit 0
