# Targets mirror the README. `make test` is the whole suite CI runs (via .ci/run).
GO ?= go

.PHONY: build demo test test-short bench bench-fifo bench-peers lint staticcheck generate fuzz tidy-check

build:
	$(GO) build -o bin/relay ./cmd/relay

demo:
	$(GO) run ./cmd/relay demo

# The whole test suite: real PostgreSQL, MariaDB (and later Redis/NATS) must be
# running; tests that cannot reach them fail.
test:
	$(GO) test -race -count=1 -timeout 30m ./...

test-short:
	$(GO) test -count=1 ./...

bench: bench-fifo

bench-fifo:
	$(GO) run ./cmd/relay bench fifo

# relay against River and watermill-sql on the local PostgreSQL (separate module bench/peers, see
# docs/benchmarks.md). Pass flags with ARGS, e.g. make bench-peers ARGS=--quick
bench-peers:
	cd bench/peers && $(GO) run . $(ARGS)

# gofmt, go vet, then staticcheck.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	@$(MAKE) --no-print-directory staticcheck

# staticcheck at a pinned version, installed into GOPATH/bin (whatever GOBIN says)
# when that version is not there yet; .ci/run calls this target too. Checks
# switched off, if any, are in staticcheck.conf with their reasons.
STATICCHECK_VERSION := 0.8.2
STATICCHECK = $(shell $(GO) env GOPATH)/bin/staticcheck

staticcheck:
	@$(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION))' || \
		GOBIN="$$($(GO) env GOPATH)/bin" $(GO) install honnef.co/go/tools/cmd/staticcheck@v$(STATICCHECK_VERSION)
	$(STATICCHECK) ./...

tidy-check:
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

# SQL lives in per-dialect .sql files embedded by the drivers; nothing is generated yet.
generate:
	$(GO) generate ./...
