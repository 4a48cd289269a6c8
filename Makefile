# perflab — see README.md. `make help` lists the targets.

GO       ?= go
BIN      := bin/perflab
VERSION  := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/perflab/perflab/internal/cli.Version=$(VERSION)
# Packages with goroutines run again under the race detector.
RACE_PKGS := ./trace/... ./probes/... ./collectors/... ./venusd/... ./protocol/... ./analyzers/... ./compare/... ./reports/... ./export/... ./lab/... ./internal/...

.PHONY: help build cross test test-race lint generate fmt update-golden clean demo e2e gate bench

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build bin/perflab
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/perflab

test: build cross ## run every test (eBPF tests skip unless root; PERFLAB_REQUIRE_BPF=1 makes them fail instead)
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race $(RACE_PKGS)

demo: build ## the whole story on the bundled workload in under two minutes (HTML report under build/demo/)
	PERFLAB=$(CURDIR)/$(BIN) scripts/demo.sh

e2e: build ## HTML reports in headless Chromium (screenshots in build/e2e/), the README tour, bench, demo, docs/sql.md in DuckDB
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	@# real servers and clients for the protocol tests: nginx with curl and h2load, memcached
	@(command -v nginx && command -v h2load && command -v memcached && command -v curl) >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light nghttp2-client memcached curl)
	@# TLS plaintext and --uprobe: a certificate, redis with TLS, python3 and libzmq5 for a ZeroMQ client and server
	@(command -v openssl && command -v redis-server && command -v redis-cli && command -v python3 && test -e /usr/lib/x86_64-linux-gnu/libzmq.so.5) >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl redis-server redis-tools python3 libzmq5)
	@# network namespaces, veth pairs and TBF for the two-host tests
	@(command -v ip && command -v tc) >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2)
	@# redis-server and redis-benchmark for the event-loop sweep (e2e/loops_test.go)
	@(command -v redis-server && command -v redis-benchmark) >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools)
	PERFLAB_E2E=1 $(GO) test -count=1 -v ./e2e/
	cd e2e/duckdb && PERFLAB_E2E=1 $(GO) test -count=1 -v .   # docs/sql.md in DuckDB (its Go driver, a module of its own)

gate: build ## perflab's own gate: coalesce+pipeline vs baseline on venusd, against bench/gate-baseline.json
	PERFLAB=$(CURDIR)/$(BIN) bench/gate.sh

bench: build ## closed-loop sweep of client counts on every transport, with Little's law and the batch model
	$(BIN) bench --transports shm,unix,tcp --clients 1,2,4,8,16

cross: ## build perflab for macOS and Windows, where analyze, compare, gate, model, merge and export run
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/perflab
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/perflab

test-race: ## run the race detector over the packages with goroutines
	$(GO) test -count=1 -race $(RACE_PKGS)

lint: ## gofmt, go vet and staticcheck (fetched through the module proxy, pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

fmt: ## gofmt every file
	gofmt -w $$(git ls-files '*.go')

generate: ## regenerate the eBPF objects with bpf2go (installs clang from Debian when missing)
	@command -v clang >/dev/null || (apt-get update -qq && apt-get install -y -qq clang llvm libbpf-dev)
	$(GO) generate ./...

update-golden: ## rewrite golden files from this run's output
	$(GO) test ./... -update

clean: ## remove build outputs
	rm -rf bin build
