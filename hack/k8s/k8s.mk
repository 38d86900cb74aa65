# Local Kubernetes control plane for tests and the demo (docs/local-cluster.md).
# Included by the top-level Makefile.
.PHONY: k8s-bins k8s-up

k8s-bins: ## build etcd, kube-apiserver, kube-controller-manager, kubectl (cached, see docs/local-cluster.md)
	bash hack/k8s/build.sh

k8s-up: build k8s-bins ## start the local cluster and local node by hand (Ctrl-C stops it)
	node --import tsx dev/up.ts
