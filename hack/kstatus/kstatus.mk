# The GitOps status tools for test/gitops-status.test.ts (docs/gitops.md). Included by the
# top-level Makefile; `test: kstatus-bin` adds it to test's prerequisites.
.PHONY: kstatus-bin

kstatus-bin: ## build hack/kstatus: kstatus, Flux's WaitForSet and a gopher-lua health runner (cached)
	bash hack/kstatus/build.sh >/dev/null

test: kstatus-bin
