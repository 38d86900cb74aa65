//go:build tools

// Package tools records the commands this module builds so that `go mod tidy` keeps
// their dependencies. It is never compiled (build tag "tools").
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
