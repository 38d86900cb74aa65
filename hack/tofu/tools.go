//go:build tools

// Package tools records the command this module builds so that `go mod tidy` keeps its
// dependencies. It is never compiled (build tag "tools").
package tools

import (
	_ "github.com/opentofu/opentofu/cmd/tofu"
)
