# Targets mirror the README. `make test` is the whole suite CI runs (via .ci/run).
GO ?= go

.PHONY: build demo test test-short bench bench-fifo bench-peers lint generate fuzz tidy-check

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

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

tidy-check:
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

# SQL lives in per-dialect .sql files embedded by the drivers; nothing is generated yet.
generate:
	$(GO) generate ./...
