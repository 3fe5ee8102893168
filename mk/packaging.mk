# Packaging, systemd unit checks and the systemd end-to-end test; included by
# the top-level Makefile, which defines VERSION, SOURCE_DATE_EPOCH and
# build-release (static bin/zoneproxy).
#
#   packages               dist/zoneproxy_<ver>-1_<arch>.deb, dist/zoneproxy-<ver>-1.<rpmarch>.rpm
#   packages-lint          lintian, rpmlint, shellcheck, package contents, unit checks
#   packages-reproducible  build the packages twice, compare bytes
#   systemd-verify         systemd-analyze verify + offline security score of the unit
#   sdnotify-test          pkg/host/sdnotify unit tests with the race detector
#   e2e-systemd            boot systemd in nspawn, install and exercise the .deb (root)

PKG_ARCH ?= amd64
_pkg_env = VERSION=$(VERSION) COMMIT=$(COMMIT) ARCH=$(PKG_ARCH) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)

.PHONY: packages packages-lint packages-reproducible systemd-verify sdnotify-test e2e-systemd

packages: build-release
	$(_pkg_env) packaging/build-packages.sh

packages-lint: packages
	$(_pkg_env) packaging/lint-packages.sh

packages-reproducible: build-release
	$(_pkg_env) packaging/check-reproducible.sh

systemd-verify:
	packaging/ensure-tools.sh systemd-analyze:systemd
	packaging/check-unit.sh systemd/zoneproxy@.service 2.0

sdnotify-test:
	$(GO) test -race -count=1 ./pkg/host/sdnotify

# Root only; installs debootstrap and systemd-container if missing and needs
# a Debian mirror on the first run (the rootfs is cached under .cache/).
e2e-systemd: packages
	CGO_ENABLED=0 $(GO) build -o bin/testcp ./test/cmd/testcp
	CGO_ENABLED=0 $(GO) build -o bin/envoy ./test/envoy
	$(_pkg_env) test/systemd/e2e.sh

# Part of `make test`.
test-packaging:: packages-lint
test-packaging:: e2e-systemd
