# The example Prometheus alert rules; included by the top-level Makefile.
#
#   alerts-test   promtool check rules and promtool test rules on
#                 examples/prometheus (promtool: packaging/ensure-promtool.sh)

.PHONY: alerts-test

alerts-test:
	@promtool=$$(packaging/ensure-promtool.sh) && \
	"$$promtool" check rules examples/prometheus/alerts.yaml && \
	cd examples/prometheus && "$$promtool" test rules alerts_test.yaml
