#!/bin/sh
# Lints what `make packages` built: lintian (deb), rpmlint (rpm), shellcheck
# (every packaging script), package contents, and the systemd unit.
#   VERSION=... [ARCH=amd64] [PKG_OUT=dist] packaging/lint-packages.sh
set -eu

die() { echo "lint-packages: FAIL: $*" >&2; exit 1; }
ok() { echo "lint-packages: ok: $*"; }

cd "$(dirname "$0")/.."
VERSION=$(packaging/version.sh) || exit 1
ARCH=${ARCH:-amd64}
PKG_OUT=${PKG_OUT:-dist}
case "$ARCH" in
	amd64) rpmarch=x86_64 ;;
	arm64) rpmarch=aarch64 ;;
	*) rpmarch=$ARCH ;;
esac
deb="$PKG_OUT/zoneproxy_${VERSION}-1_${ARCH}.deb"
rpm="$PKG_OUT/zoneproxy-${VERSION}-1.${rpmarch}.rpm"
[ -f "$deb" ] || die "$deb not found (make packages)"
[ -f "$rpm" ] || die "$rpm not found (make packages)"

packaging/ensure-tools.sh lintian rpmlint rpm shellcheck dpkg-deb:dpkg cpio systemd-analyze:systemd

# The guides the packages ship in /usr/share/doc/zoneproxy (nfpm.yaml).
docs="README.md docs/operator-guide.md docs/migration-from-kuma-dp.md docs/benchmarks.md docs/benchmark-history.md"

tmp=$(mktemp -d)
ltmp=""
trap 'rm -rf "$tmp" ${ltmp:+"$ltmp"}' EXIT

# --- shellcheck --------------------------------------------------------------
# rpm scriptlets are bodies run by /bin/sh; deb scripts have #!/bin/sh.
set -- packaging/scripts/deb/* packaging/scripts/rpm/* packaging/*.sh
shellcheck -s sh "$@" || die "shellcheck"
n=$#
# Test scripts: the dialect their shebang names.
set --
for f in test/systemd/*.sh; do [ -f "$f" ] && set -- "$@" "$f"; done
[ $# -eq 0 ] || shellcheck "$@" || die "shellcheck"
ok "shellcheck ($((n + $#)) scripts)"

# --- the unit ------------------------------------------------------------------
packaging/check-unit.sh systemd/zoneproxy@.service 2.0 || die "unit checks"

# --- lintian -------------------------------------------------------------------
# As an unprivileged user where possible: lintian unpacks untrusted archives.
# nobody works in a directory of its own under /tmp: it may not enter the
# checkout (under a 0700 home) or $TMPDIR.
if [ "$(id -u)" -eq 0 ] && command -v runuser >/dev/null 2>&1; then
	ltmp=$(mktemp -d /tmp/lint-packages.XXXXXX)
	chmod 0755 "$ltmp"
	cp "$deb" "$ltmp/"
	chmod 0644 "$ltmp/$(basename "$deb")"
	mkdir "$ltmp/home" && chown nobody "$ltmp/home"
	out=$(cd "$ltmp" && runuser -u nobody -- env HOME="$ltmp/home" TMPDIR="$ltmp/home" \
		lintian --pedantic -I --fail-on error,warning "$ltmp/$(basename "$deb")" 2>&1) || {
		printf '%s\n' "$out" >&2
		die "lintian"
	}
else
	out=$(lintian --pedantic -I --fail-on error,warning "$deb" 2>&1) || { printf '%s\n' "$out" >&2; die "lintian"; }
fi
# The override for a first upload is unused once a snapshot follows a release.
out=$(printf '%s\n' "$out" | grep -v -e 'running with root privileges' \
	-e '^I: zoneproxy: unused-override initial-upload-closes-no-bugs ' -e '^N: 0 hints overridden; 1 unused override$' || true)
[ -z "$out" ] || { printf '%s\n' "$out" >&2; die "lintian printed tags"; }
ok "lintian: no tags ($(basename "$deb"))"

# --- rpmlint -------------------------------------------------------------------
# nfpm writes absolute names into the cpio payload; rpmlint unpacks with
# `rpm2cpio | cpio -id`, which would write into / . Force relative names.
mkdir "$tmp/bin"
printf '#!/bin/sh\nexec /usr/bin/cpio --no-absolute-filenames "$@"\n' >"$tmp/bin/cpio"
chmod 0755 "$tmp/bin/cpio"
out=$(cd "$tmp" && PATH="$tmp/bin:$PATH" HOME="$tmp" rpmlint -c "$OLDPWD/packaging/rpmlint.toml" "$OLDPWD/$rpm" 2>&1) || {
	printf '%s\n' "$out" >&2
	die "rpmlint"
}
printf '%s\n' "$out" | grep -q '0 errors, 0 warnings' || { printf '%s\n' "$out" >&2; die "rpmlint"; }
ok "rpmlint: $(printf '%s\n' "$out" | tail -n1)"

# --- deb contents ---------------------------------------------------------------
dpkg-deb -c "$deb" >"$tmp/deb.list"
# Nothing in /etc/zoneproxy an instance could start from: no conffiles, no
# files, only the two directories.
if dpkg-deb -I "$deb" conffiles >"$tmp/deb.conffiles" 2>/dev/null; then
	die "deb: has conffiles: $(tr '\n' ' ' <"$tmp/deb.conffiles")"
fi
grep -E ' \./etc/' "$tmp/deb.list" | grep -v -E ' \./etc/(zoneproxy/(tokens/)?)?$' >"$tmp/deb.etc" || true
[ ! -s "$tmp/deb.etc" ] || die "deb: installs in /etc: $(cat "$tmp/deb.etc")"
# Every example, under the docs.
for f in $(find examples -type f | LC_ALL=C sort); do
	grep -q "^-rw-r--r-- root/root .* ./usr/share/doc/zoneproxy/$f\$" "$tmp/deb.list" || die "deb: $f is not in /usr/share/doc/zoneproxy (0644)"
done
# The guides, beside the examples as in the repository.
for f in $docs; do
	grep -q "^-rw-r--r-- root/root .* ./usr/share/doc/zoneproxy/$f\$" "$tmp/deb.list" || die "deb: $f is not in /usr/share/doc/zoneproxy (0644)"
done
for p in ./usr/bin/zoneproxy ./usr/lib/systemd/system/zoneproxy@.service \
	./usr/share/man/man1/zoneproxy.1.gz ./usr/share/man/man1/zoneproxy-run.1.gz \
	./usr/share/bash-completion/completions/zoneproxy ./usr/share/zsh/vendor-completions/_zoneproxy \
	./usr/share/fish/vendor_completions.d/zoneproxy.fish ./usr/share/doc/zoneproxy/copyright \
	./usr/share/doc/zoneproxy/changelog.Debian.gz ./usr/lib/sysusers.d/zoneproxy.conf ./usr/lib/sysctl.d/60-zoneproxy.conf; do
	grep -q " $p\$" "$tmp/deb.list" || die "deb: $p missing"
done
grep -q '^drwxr-x--- root/zoneproxy .* ./etc/zoneproxy/tokens/$' "$tmp/deb.list" || die "deb: tokens/ must be root:zoneproxy 0750"
[ "$(dpkg-deb -f "$deb" Recommends)" = envoy ] || die "deb: Recommends should be envoy"
[ "$(dpkg-deb -f "$deb" Version)" = "$VERSION-1" ] || die "deb: version is not $VERSION-1"
# Without them removal would neither stop nor disable instances, and an
# upgrade would not restart them.
dpkg-deb --ctrl-tarfile "$deb" | tar -tf - >"$tmp/deb.ctrl"
for script in preinst postinst prerm postrm; do
	grep -qx "./$script" "$tmp/deb.ctrl" || die "deb: no $script maintainer script"
done
ok "deb contents"

# --- rpm contents ---------------------------------------------------------------
rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEMODES:perms} %{FILENAMES}\n]' "$rpm" >"$tmp/rpm.list" 2>/dev/null
grep -E ' /etc/' "$tmp/rpm.list" | grep -v -E '^ root:(root|zoneproxy) d[rwx-]+ /etc/zoneproxy(/tokens)?$' >"$tmp/rpm.etc" || true
[ ! -s "$tmp/rpm.etc" ] || die "rpm: installs more than two directories in /etc: $(cat "$tmp/rpm.etc")"
for f in $(find examples -type f | LC_ALL=C sort); do
	grep -q "^d root:root -rw-r--r-- /usr/share/doc/zoneproxy/$f\$" "$tmp/rpm.list" || die "rpm: $f is not %doc in /usr/share/doc/zoneproxy (0644)"
done
for f in $docs; do
	grep -q "^d root:root -rw-r--r-- /usr/share/doc/zoneproxy/$f\$" "$tmp/rpm.list" || die "rpm: $f is not %doc in /usr/share/doc/zoneproxy (0644)"
done
for d in zoneproxy zoneproxy/examples zoneproxy/docs; do
	grep -q "^ root:root drwxr-xr-x /usr/share/doc/$d\$" "$tmp/rpm.list" || die "rpm: does not own /usr/share/doc/$d"
done
grep -q ' root:zoneproxy drwxr-x--- /etc/zoneproxy/tokens$' "$tmp/rpm.list" || die "rpm: tokens/ must be root:zoneproxy 0750"
grep -q ' /usr/lib/systemd/system/zoneproxy@.service$' "$tmp/rpm.list" || die "rpm: unit missing"
grep -q '^d .* /usr/share/man/man1/zoneproxy.1.gz$' "$tmp/rpm.list" || die "rpm: man page missing"
[ "$(rpm -qp --recommends "$rpm" 2>/dev/null)" = envoy ] || die "rpm: Recommends should be envoy"
rpm -qp --scripts "$rpm" 2>/dev/null >"$tmp/rpm.scripts"
for script in preinstall postinstall preuninstall postuninstall posttrans; do
	grep -q "^$script scriptlet" "$tmp/rpm.scripts" || die "rpm: no $script scriptlet"
done
[ -n "$(rpm -qp --changelog "$rpm" 2>/dev/null)" ] || die "rpm: no changelog"
ok "rpm contents"

# --- the shipped binary ---------------------------------------------------------
dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/bin/zoneproxy >"$tmp/zoneproxy"
go version -m "$tmp/zoneproxy" >"$tmp/buildinfo" || die "binary: no Go build info"
for setting in CGO_ENABLED=0 -trimpath=true -tags=grpcnotrace; do
	grep -q "^[[:space:]]*build[[:space:]]*$setting\$" "$tmp/buildinfo" ||
		die "binary: not built with $setting (make build-release): $(grep build "$tmp/buildinfo" | tr -s '[:space:]' ' ')"
done
ok "binary: static, trimmed, grpc without x/net/trace"
