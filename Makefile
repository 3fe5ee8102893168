# zoneproxy — run `make demo` to see it work, `make test` to check everything.
SHELL := /bin/bash
.DEFAULT_GOAL := build

export PATH := /usr/local/go/bin:$(PATH)
GO ?= go

# Expanded once per make run, so every target sees the same values.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell packaging/version.sh 2>/dev/null || echo unknown)
endif
ifeq ($(origin COMMIT),undefined)
COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
endif
ifeq ($(origin SOURCE_DATE_EPOCH),undefined)
SOURCE_DATE_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
endif
BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
PKG := github.com/zoneproxy/zoneproxy/pkg/version
LDFLAGS := -X $(PKG).Version=$(VERSION) -X $(PKG).Commit=$(COMMIT) -X $(PKG).BuildDate=$(BUILD_DATE)

FUZZTIME ?= 30s

# grpcnotrace leaves golang.org/x/net/trace out of grpc (the agent never
# enables its tracing): 2.8 MB less binary, fewer pages touched at start.
# Packages check that the binary they ship was built with it.
GOTAGS ?= grpcnotrace

.PHONY: build build-release demo test check-format vet unit test-e2e-kuma214 race fuzz clean generate check-generated

build: ## Build bin/zoneproxy for this machine.
	$(GO) build -tags "$(GOTAGS)" -ldflags "$(LDFLAGS)" -o bin/zoneproxy ./cmd/zoneproxy

build-release: ## Static, stripped, reproducible bin/zoneproxy for packages.
	CGO_ENABLED=0 $(GO) build -tags "$(GOTAGS)" -trimpath -buildvcs=false -ldflags "-s -w $(LDFLAGS)" -o bin/zoneproxy ./cmd/zoneproxy

demo: ## Wait-for-mesh → bootstrap → Envoy ready → drain, on loopback (DEMO_SECONDS=N to stop after N s).
	$(GO) build -o bin/demo ./test/cmd/demo
	./bin/demo

test: check-format vet alerts-test cloud-init-test test-packaging unit test-e2e-kuma214 ## Everything CI runs (go test last, so its summary closes the output).

check-format:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The e2e tests spend most of their time waiting on the processes they run
# (drains, kuma-cp's deregistration delay), so four run at once whatever
# the core count: on two cores that halves the suite's time.
E2E_PARALLEL = 4

unit: ## Unit, end-to-end and fuzz-seed tests.
	$(GO) test -count=1 -timeout 15m -parallel $(E2E_PARALLEL) ./...

# The e2e suite's core, run again against the test control plane's kuma-cp
# 2.14 mode: test/e2e/README.md lists the tests and why these.
E2E_KUMA214 = TestWaitForMeshThenServeThenDrain|TestKuma214[A-Za-z]*|TestRestartServesTheCacheWhileKumaCPHoldsTheOldStream|TestRestartWhileTheControlPlaneIsDownServesFromCache|TestControlPlaneRestartWhileRunning|TestReloadKeepsEnvoyAndEveryConnection|TestEnvoyHandoverDropsNoConnection|TestDrainUndrainAndStopWhileDrained|TestEgressStopAndDrainRefuseNoSidecarConnection|TestUndrainAfterAWithdrawalThatFailedServesAgain|TestMeshAccessLogReachesATCPBackend|TestMeshMetricPrometheusScrapeIsFilteredAndLabelled|TestRelayKeepsTheTokenOutOfEnvoysBootstrap|TestAnEgressIsHandedToSidecarsOnlyOnceItServes|TestALoneEgressRestartKeepsItsSidecarsServed|TestAnIngressRestartBehindALoadBalancerRefusesNothing

test-e2e-kuma214: ## The e2e suite's core against kuma-cp 2.14 (ZP_E2E_KUMA=2.14).
	ZP_E2E_KUMA=2.14 $(GO) test -count=1 -timeout 10m -parallel $(E2E_PARALLEL) -run '^($(E2E_KUMA214))$$' ./test/e2e

race: ## Unit and end-to-end tests with the race detector (binaries too).
	GORACE=atexit_sleep_ms=0 GOFLAGS=-race $(GO) test -count=1 -timeout 20m ./...

fuzz: ## Run every fuzz target for FUZZTIME each.
	@set -e; for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' pkg test | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$spec/*_test.go | sed 's/func //'); do \
	    echo "fuzz $$spec $$f"; $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./$$spec; \
	  done; done

clean:
	rm -rf bin dist

# The .proto files' Go code is generated without protoc (tools/protogen,
# its own module) and committed.
PROTOS = $(shell find pkg -name '*.proto' | sort)

generate: ## Regenerate the committed Go code of the .proto files.
	cd tools/protogen && $(GO) run . -root ../.. $(PROTOS)

check-generated: ## Fail when a committed .pb.go differs from what generate writes.
	cd tools/protogen && $(GO) run . -check -root ../.. $(PROTOS)

-include mk/*.mk

# Targets the included files may not define yet.
test-packaging::
