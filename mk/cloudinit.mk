# The example cloud-init user-data; included by the top-level Makefile.
#
#   cloud-init-test   cloud-init schema on examples/cloud-init/user-data.yaml
#                     (packaging/check-cloud-init.sh fetches cloud-init)

.PHONY: cloud-init-test

cloud-init-test:
	packaging/check-cloud-init.sh examples/cloud-init/user-data.yaml
