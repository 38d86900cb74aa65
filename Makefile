# atlantis-operator — every entry point a developer or CI needs.
#   make test   the style gate and the whole test suite (installs deps, builds, builds the local control plane)
#   make run    the local demo
#   make bench  benchmarks

SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help
NODE_TEST_FLAGS ?= --test-concurrency=2 --test-timeout=600000
TESTS ?= $(shell find test -name '*.test.ts' | sort)

.PHONY: help deps build typecheck lint format test unit-test bench run clean redis-bin chromium-bin crds

help:
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

node_modules/.deps-stamp: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

deps: node_modules/.deps-stamp ## install npm dependencies (npm ci)

build: deps ## compile TypeScript to dist/ and bundle the CLI (dist/atlantis-operator.cjs)
	npx tsc -p tsconfig.json
	node hack/bundle.mjs

typecheck: deps
	npx tsc -p tsconfig.json --noEmit

lint: deps ## the style gate: Biome's linter and formatter check, no writes (biome.json)
	npx biome ci .

format: deps ## format the tree and apply Biome's safe fixes
	npx biome check --write .

test: lint build k8s-bins helm-bin redis-bin chromium-bin ## the style gate, then every test (node:test through tsx)
	node --import tsx dev/with-cluster.ts -- node --import tsx --test $(NODE_TEST_FLAGS) $(TESTS)

bench: build k8s-bins redis-bin provider-bin ## run benchmarks and print figures (BENCH="monorepo soak" runs those only)
	node --import tsx dev/with-cluster.ts -- node --import tsx bench/run.ts $(BENCH)

run: build k8s-bins redis-bin ## the local demo: a rolling upgrade that never kills terraform (Ctrl-C stops it)
	node --import tsx dev/demo.ts

redis-bin: ## redis-server for the Redis store's tests (the Debian package; hack/deps/redis.sh)
	bash hack/deps/redis.sh

chromium-bin: ## Debian's Chromium for the browser tests (driven by playwright-core; hack/deps/chromium.sh)
	bash hack/deps/chromium.sh

crds: deps ## write the AtlantisDeployment CRD (crds/ and the chart's copy) from hack/crd/ and the pinned Kubernetes OpenAPI
	node --import tsx hack/crd/generate.ts

clean:
	rm -rf dist

-include hack/k8s/k8s.mk
-include hack/helm/helm.mk
-include hack/kstatus/kstatus.mk
-include hack/provider/provider.mk
-include hack/tofu/tofu.mk
-include hack/conftest/conftest.mk
-include hack/gitea/gitea.mk
-include hack/image/image.mk
