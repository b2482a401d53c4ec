# Targets mirror the README. `make test` is the whole suite CI runs (via .ci/run).
GO ?= go

.PHONY: build demo test test-short bench bench-fifo bench-peers lint staticcheck generate fuzz tidy-check deploy-check package-shipsync

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

# Fuzz every decoder that reads outside input (STYLE.md §3), FUZZTIME per
# target (default 1m; CI runs 10000x, a count — see .ci/run). Every
# `func Fuzz…` in a _test.go file is a target, found by name, so a new one is
# never left out; -fuzz takes one target of one package, so each runs alone.
FUZZTIME ?= 1m

fuzz:
	@set -e; git grep -n -o '^func Fuzz[A-Za-z0-9_]*' -- '*_test.go' | \
	while IFS=: read -r file _ fn; do \
		name=$${fn#func }; pkg=./$$(dirname "$$file"); \
		echo "fuzz: $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) "$$pkg" </dev/null; \
	done

tidy-check:
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

# Generated code is committed (builds and CI never generate): the shipsync
# Protobuf code comes from internal/tools/protogen (pure Go, no protoc) via
# go:generate; internal/tools/protogen's test fails when it is out of date.
generate:
	$(GO) generate ./...

# The deployment files (deploy/): helm lint and render of the shipsync-shore
# chart with helm v4 built from the Go proxy (not in go.mod), then the checks
# of ./deploy on the rendered manifests (docs/shipsync/operations.md).
deploy-check:
	bash deploy/check.sh

# The ship's offline package of relay shipsync: make package-shipsync
# VERSION=1.2.3 [GOOS=linux GOARCH=arm64] lays out dist/shipsync-client-… and
# its .tar.gz with SHA256SUMS, install.sh and rollback.sh.
package-shipsync:
	@test -n "$(VERSION)" || (echo "make package-shipsync VERSION=x.y.z"; exit 2)
	bash deploy/shipsync/package/package.sh $(VERSION) dist
