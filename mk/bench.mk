# Benchmarks; included by the top-level Makefile. Not part of `make test`.
#
#   bench     release build (make build-release), then zpbench: every figure
#             of docs/benchmarks.md against the test control plane and the
#             Envoy stand-in, printed as a table with PASS/FAIL; fails if a
#             figure misses its target. Knobs: ZPBENCH_* (docs/benchmarks.md).
#   bench-go  Go benchmarks of the hot pure functions, the start-up path, a
#             MeshMetric scrape (pure, and through the admin and hijacker sockets)
#             and a 1 MB xDS response straight and through the relay.

BENCHTIME ?= 1s

.PHONY: bench bench-go

bench: build-release
	CGO_ENABLED=0 $(GO) build -o bin/envoy-standin ./test/envoy
	$(GO) build -o bin/zpbench ./test/bench/cmd/zpbench
	bin/zpbench -zoneproxy bin/zoneproxy -envoy bin/envoy-standin

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./pkg/kuma/dataplane ./pkg/kuma/bootstrap ./test/bench ./pkg/xds/relay
