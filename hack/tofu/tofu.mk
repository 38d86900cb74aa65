# OpenTofu for the tests (docs/test-tools.md). Included by the top-level Makefile;
# `test: tofu-bin` adds it to test's prerequisites.
.PHONY: tofu-bin

tofu-bin: ## build tofu from the pinned Go modules in hack/tofu (cached, see docs/test-tools.md)
	bash hack/tofu/build.sh >/dev/null

test: tofu-bin
