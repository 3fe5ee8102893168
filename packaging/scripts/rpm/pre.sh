# %pre: the account must exist before unpack (/etc/zoneproxy/tokens is
# group-owned by it). Never deleted. POSIX sh: rpm runs the body with /bin/sh.
getent group zoneproxy >/dev/null 2>&1 || groupadd --system zoneproxy
if ! getent passwd zoneproxy >/dev/null 2>&1; then
	nologin=/sbin/nologin
	[ -x "$nologin" ] || nologin=/usr/sbin/nologin
	useradd --system --gid zoneproxy --no-create-home --home-dir /var/lib/zoneproxy \
		--shell "$nologin" --comment "Kuma zone proxy" zoneproxy
fi

# Snapshots before 0.0.0~git20261122222139 installed these examples as
# %config(noreplace) in /etc/zoneproxy. Upgrading removes an untouched one and saves an edited one
# as <file>.rpmsave. One whose instance is enabled or running must stay where
# it is, or the instance breaks when %posttrans restarts it: keep a copy for
# %posttrans to put back.
if [ "$1" -ge 2 ]; then
	for name in payments-egress payments-ingress backend-combined; do
		conffile=/etc/zoneproxy/$name.yaml
		unit="zoneproxy@$name.service"
		[ -f "$conffile" ] || continue
		if [ -z "$(find /etc/systemd/system -type l \( -path "*.wants/$unit" -o -path "*.requires/$unit" \) 2>/dev/null)" ]; then
			[ -d /run/systemd/system ] || continue
			case "$(systemctl is-active "$unit" 2>/dev/null)" in
				inactive | failed | unknown | "") continue ;;
			esac
		fi
		cp -p "$conffile" "$conffile.rpm-keep" 2>/dev/null || :
	done
fi
exit 0
