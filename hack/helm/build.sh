#!/usr/bin/env bash
# Builds helm from the pinned Go module in this folder (helm.sh/helm/v3, see go.mod) into
#   ${ATLANTIS_HELM_CACHE:-$HOME/.cache/atlantis-operator/helm}/<helm version>/helm
# for the chart's tests (charts/atlantis-operator, test/helm-*.test.ts). A binary already
# there is not rebuilt. Any failure exits non-zero with one line saying why, so
# `make helm-bin` / `make test` fail loudly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

fail() {
  echo "helm-bin: FAILED: $*" >&2
  exit 1
}

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || fail "no 'go' command found (need Go >= 1.26 to build helm)"

# A module's version in go.mod, in a require block or on a single require line.
modver() { awk -v m="$1" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' go.mod; }
version="$(modver helm.sh/helm/v3)"
[[ -n "$version" ]] || fail "cannot read the helm.sh/helm/v3 version from $here/go.mod"
dest="${ATLANTIS_HELM_CACHE:-$HOME/.cache/atlantis-operator/helm}/$version"

if [[ -x "$dest/helm" ]]; then
  echo "helm-bin: helm $version present in $dest"
  exit 0
fi

echo "helm-bin: building helm $version into $dest (a few minutes on 2 cores the first time; later runs reuse it)"
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
# The Kubernetes version helm lint / template assume without a cluster, as helm's own
# Makefile derives it from the client-go it is built with (v0.37.x -> 1.37).
cg="$(modver k8s.io/client-go)"
[[ "$cg" =~ ^v0\.([0-9]+)\. ]] || fail "cannot read the k8s.io/client-go version from $here/go.mod"
kminor="${BASH_REMATCH[1]}"
v=helm.sh/helm/v3
ldflags="-s -w -X $v/internal/version.version=$version -X $v/internal/version.gitTreeState=clean"
ldflags+=" -X $v/pkg/lint/rules.k8sVersionMajor=1 -X $v/pkg/lint/rules.k8sVersionMinor=$kminor"
ldflags+=" -X $v/pkg/chartutil.k8sVersionMajor=1 -X $v/pkg/chartutil.k8sVersionMinor=$kminor"
CGO_ENABLED=0 nice go build -trimpath -ldflags="$ldflags" -o "$tmp/helm" "$v/cmd/helm" ||
  fail "go build of $v/cmd/helm $version failed (see the go output above)"
got="$("$tmp/helm" version --template '{{.Version}}' 2>&1)" || fail "the built helm does not run: $got"
[[ "$got" == "$version" ]] || fail "the built helm reports version '$got', expected $version"
mv -f "$tmp/helm" "$dest/helm"
echo "helm-bin: built helm $version in $(($(date +%s) - start)) s into $dest"
