# Sluice's developer entry points. Every target installs and starts what it needs.
#   make build  bin/sluice-worker and bin/sluice (BINDIR=dir for another directory)
#   make demo   the embedded default: local Postgres, Temporal dev server, a worker and a sample
#               pipeline into a local Iceberg warehouse, results shown
#   make test   every test, against real services started by cmd/devstack (unit packages
#               with the race detector)
#   make stop   stop the services devstack started
#   make bench  issue 21's goals, baselines and profiles of every miss, written to
#               docs/benchmarks.md (BENCH_FLAGS=--scaling adds the parallelism series)
#   make proto  regenerate the plugin protocol's Go code (sinks/plugin/proto) from its .proto
SHELL := /bin/bash
GO ?= go
export SLUICE_CACHE ?= $(HOME)/.cache/sluice
TEST_TIMEOUT ?= 45m
# The end-to-end tests mostly wait (backfills, heartbeat timeouts after a killed worker), so
# several run at once on two cores, but an at-scale test beside at most three others (the lanes
# of tests/lanes_test.go); each has its own database, task queue and directories. Fewer at once
# leave the cores idle while the tests wait; this many kept them busy and make test shortest.
E2E_PARALLEL ?= 7
WORKFLOWCHECK := go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0
# The fault points (internal/faults) exist only in a build with this tag; nothing shipped has
# it. The end-to-end tests build their workers with it themselves (localrun.FaultsTag); the two
# packages whose code differs with it are vetted and unit-tested both ways.
FAULTS_TAG := faults
FAULTS_PKGS := ./internal/faults/ ./worker/
BINDIR ?= bin
# make test's own stack directory, when it has one (scripts/test-dirs.sh); stop and status look there.
TEST_STACK := $(shell scripts/test-dirs.sh --own-stack)
# --version reads the module version and commit from the binary's build info; these are the
# fallbacks for a build without VCS information (no .git, -buildvcs=false).
VERSION_PKG := github.com/sluicecdc/sluice/internal/version
LDFLAGS := -X $(VERSION_PKG).commit=$(shell git rev-parse HEAD 2>/dev/null) \
	-X $(VERSION_PKG).tag=$(shell git describe --tags --always --dirty 2>/dev/null)

.PHONY: build tools services test vet workflowcheck demo stop status bench proto

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BINDIR)/sluice-worker ./worker
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BINDIR)/sluice ./starter

tools:
	@scripts/install-tools.sh all

services: tools
	@$(GO) run ./cmd/devstack start

vet:
	$(GO) vet ./...
	$(GO) vet -tags $(FAULTS_TAG) $(FAULTS_PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

workflowcheck:
	@if [ -d workflows ]; then $(GO) run $(WORKFLOWCHECK) ./workflows/...; fi

# scripts/test.sh runs the end-to-end tests of ./tests (which build their own worker binaries
# and mostly wait on services) with, beside them at nice 19, the unit packages that use no shared
# service; then the unit packages that use the services (beside ./tests, the services served them
# at full priority and the end-to-end tests' waits timed out; their test binaries are built beside
# ./tests, at idle priority). Unit packages run with the race detector (but for three volume
# tests of sinks/clickhouse and source: scripts/test.sh says why), and FAULTS_PKGS again with the
# faults tag. Every step must pass.
# Its services are a stack of its own and its temporary files live in memory when the machine has
# a tmpfs with room (scripts/test-dirs.sh says where, and why).
# make test's services schedule their goroutines on one P (GOMAXPROCS=1; the Go ones: the
# Temporal dev server, gocaves, weed), as do the workers and the CLI the end-to-end tests start
# (tests/pipeline_helpers_test.go): many tests at once keep both cores busy, so a second P only
# spins looking for work and wakes threads, on machines where a context switch is dear; the
# scheduler (findRunnable, sysmon, their sleeps) was about a quarter of the dev server's and the
# workers' CPU in a profile during make test. make demo, make bench and a user's services keep
# every core.
test: tools vet workflowcheck
	@eval "$$(scripts/test-dirs.sh)" && GOMAXPROCS=1 $(GO) run ./cmd/devstack start && \
		GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) E2E_PARALLEL=$(E2E_PARALLEL) FAULTS_TAG=$(FAULTS_TAG) \
		FAULTS_PKGS='$(FAULTS_PKGS)' scripts/test.sh

demo: tools
	@scripts/demo.sh

# stop also stops make test's own stack, and frees the memory its data took.
stop:
	@$(GO) run ./cmd/devstack stop
	@if [ -d "$(TEST_STACK)" ]; then $(GO) run ./cmd/devstack --dir "$(TEST_STACK)" stop && rm -rf "$(TEST_STACK)"; fi

bench: tools
	@$(GO) run ./cmd/bench $(BENCH_FLAGS)

proto:
	@scripts/gen-proto.sh

status:
	@$(GO) run ./cmd/devstack status
	@if [ -d "$(TEST_STACK)" ]; then echo "make test's stack ($(TEST_STACK)):"; $(GO) run ./cmd/devstack --dir "$(TEST_STACK)" status; fi
