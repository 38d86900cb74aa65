# helm for the chart's tests (charts/atlantis-operator, docs/gitops.md). Included by the
# top-level Makefile.
.PHONY: helm-bin

helm-bin: ## build helm from the pinned Go module in hack/helm (cached, see docs/gitops.md)
	bash hack/helm/build.sh
