# The Ansible role in examples/ansible and its end-to-end test; included by
# the top-level Makefile, which defines VERSION and SOURCE_DATE_EPOCH, and
# after mk/packaging.mk (packages).
#
#   e2e-ansible   ansible-lint the role, then ansible-playbook against two
#                 systemd-nspawn Debian containers (root; installs
#                 ansible-core, ansible-lint, debootstrap if missing)

.PHONY: e2e-ansible

e2e-ansible: packages
	packaging/ensure-tools.sh ansible-lint shellcheck
	shellcheck -x test/ansible/e2e.sh
	ansible-lint --nocolor -p examples/ansible
	CGO_ENABLED=0 $(GO) build -o bin/testcp ./test/cmd/testcp
	CGO_ENABLED=0 $(GO) build -o bin/envoy ./test/envoy
	$(_pkg_env) test/ansible/e2e.sh

# Part of `make test`.
test-packaging:: e2e-ansible
