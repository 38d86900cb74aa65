# conftest for the policy-check tests (docs/test-tools.md). Included by the top-level
# Makefile; `test: conftest-bin` adds it to test's prerequisites.
.PHONY: conftest-bin

conftest-bin: ## build conftest from the pinned Go modules in hack/conftest (cached, see docs/test-tools.md)
	bash hack/conftest/build.sh >/dev/null

test: conftest-bin
