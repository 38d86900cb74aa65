# terraform-provider-fixture, the provider the network-mirror tests serve (docs/test-tools.md).
# Included by the top-level Makefile; `test: provider-bin` adds it to test's prerequisites.
.PHONY: provider-bin

provider-bin: ## build the test provider in hack/provider (cached, see docs/test-tools.md)
	bash hack/provider/build.sh >/dev/null

test: provider-bin
