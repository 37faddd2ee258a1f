# Breakwater — make targets. `make run` and `make test` work on a fresh machine.
GO        ?= go
BIN       := bin/breakwater
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
GOBIN     := $(shell $(GO) env GOPATH)/bin
STATICCHECK_VERSION := v0.8.2

.PHONY: run build test test-deps compat-deps compat-docs lint bench fuzz clean console-screenshots

# FUZZ_TARGETS are the Go fuzz targets, package:function. `make fuzz` runs
# each for FUZZTIME; `make test` runs each for FUZZTIME_SHORT. Go allows
# one -fuzz target per `go test`, hence the loop.
FUZZ_TARGETS := \
	./internal/runtime/wire:FuzzParse \
	./internal/runtime/accesslog:FuzzLines \
	./internal/runtime/sse:FuzzReader \
	./internal/runtime/translate:FuzzRequests \
	./internal/runtime/translate:FuzzResponses \
	./internal/runtime/translate:FuzzStreams \
	./internal/runtime/config:FuzzParse \
	./internal/engine:FuzzParseRetryHint \
	./internal/engine:FuzzParseResetText \
	./internal/engine:FuzzParseToolLimitText \
	./internal/engine/strategy:FuzzParseQuotaHeaders \
	./internal/engine/admission:FuzzParseBodyRetryHint \
	./internal/policies:FuzzLiteralsNeverHideAMatch \
	./internal/policies:FuzzGoCatalogue \
	./plugins/abi:FuzzDecodeBinary \
	./plugins/abi:FuzzDecodeRouteBinary \
	./internal/redact:FuzzRedact
FUZZTIME       ?= 30s
FUZZTIME_SHORT ?= 2s

run: build
	./$(BIN) serve

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/breakwater

# test-deps installs what the tests need on a fresh Debian machine.
test-deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (Redis store tests, dashboard browser test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# compat-deps installs the compatibility suite's pinned clients (npm ci in
# compat/), only when compat/package-lock.json is newer than the install.
compat-deps:
	@cd compat && if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
		echo "npm ci in compat/ (pinned client SDKs and agents)"; npm ci --no-audit --no-fund --loglevel=error; fi

# compat-docs reruns the compatibility suite and regenerates the matrix in
# docs/compatibility.md.
compat-docs: compat-deps
	$(GO) test -count=1 -run TestCompatibility ./compat -update

test: test-deps compat-deps build
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 12m ./internal/... ./plugins/...
	$(GO) test -count=1 -timeout 10m ./internal/plugins/... ./cmd/... ./examples/... ./bench/...
	$(GO) test -count=1 -timeout 5m -run 'RoutingPlugin|RoutePlugin' ./internal/runtime/gateway/
	BREAKWATER_COMPAT=1 $(GO) test -count=1 -timeout 5m ./compat/...
	cd sdk && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/quota-header-plugin && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/route-plugin && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./... && $(GO) test -count=1 ./...
	cd e2e/console && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

# console-screenshots refreshes docs/console/*.png from the console's browser test.
console-screenshots:
	cd e2e/console && $(GO) test -count=1 -timeout 5m ./... -args -screenshots $(CURDIR)/docs/console

# fuzz runs every fuzz target for FUZZTIME; a failing input is written to
# the package's testdata/fuzz and fails the run. Go 1.26's coordinator may
# end a run at the fuzztime boundary with a bare "context deadline
# exceeded" and no failing input (golang/go#75804, fixed in Go 1.27): that
# run is checked by replaying the target's corpus instead.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		if ! out=$$($(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg 2>&1); then \
			case "$$out" in \
			*"Failing input written to"*) echo "$$out"; exit 1;; \
			*"context deadline exceeded"*) \
				echo "  fuzztime shutdown race (golang/go#75804), no failing input: replaying the corpus"; \
				$(GO) test -count=1 -run="^$$fn$$" $$pkg >/dev/null || { $(GO) test -count=1 -run="^$$fn$$" $$pkg; exit 1; };; \
			*) echo "$$out"; exit 1;; \
			esac; \
		fi; \
	done

lint:
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...
	cd e2e/console && $(GO) vet ./... && $(GOBIN)/staticcheck ./...

# PROFILE=1 also writes CPU and allocation profiles of the gateway for
# every scenario to bench/results/profiles (the gateway runs with --pprof).
bench: build
	$(GO) run ./bench -bin ./$(BIN) -out bench/results $(if $(filter 1,$(PROFILE)),-profile)

clean:
	rm -rf bin
