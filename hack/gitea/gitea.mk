# Gitea for the Gitea tests (docs/test-tools.md). Included by the top-level Makefile;
# `test: gitea-bin` and `bench: gitea-bin` add it to their prerequisites (bench/host-overhead.ts runs it).
.PHONY: gitea-bin

gitea-bin: ## build Gitea from the pinned Go modules in hack/gitea, with its options/ (cached, see docs/test-tools.md)
	bash hack/gitea/build.sh >/dev/null

test: gitea-bin
bench: gitea-bin
