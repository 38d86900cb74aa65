#!/usr/bin/env bash
# Builds the local Kubernetes control plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kubectl) from the pinned Go modules in this folder into
#   ${ATLANTIS_K8S_CACHE:-$HOME/.cache/atlantis-operator/k8s}/<k8s version>/
# Binaries already present (there, or in $KUBEBUILDER_ASSETS) are not rebuilt.
# Any failure exits non-zero with the reason, so `make k8s-bins` / `make test` fail loudly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "k8s-bins: FAILED: no 'go' command found (need Go >= 1.26 to build the local control plane)" >&2
  exit 1
fi

version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' go.mod)"
if [[ -z "$version" ]]; then
  echo "k8s-bins: FAILED: cannot read the k8s.io/kubernetes version from $here/go.mod" >&2
  exit 1
fi
cache_root="${ATLANTIS_K8S_CACHE:-$HOME/.cache/atlantis-operator/k8s}"
dest="$cache_root/$version"

declare -A pkg=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
order=(etcd kube-apiserver kube-controller-manager kubectl)

missing=()
for b in "${order[@]}"; do
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$b" ]]; then
    echo "k8s-bins: $b: using \$KUBEBUILDER_ASSETS/$b"
  elif [[ -x "$dest/$b" ]]; then
    echo "k8s-bins: $b: present in $dest"
  else
    missing+=("$b")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "k8s-bins: building ${missing[*]} (Kubernetes $version) into $dest"
echo "k8s-bins: a cold build takes a while (5 to 20 minutes on 2 cores); later runs reuse the cache"
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
trap 'echo "k8s-bins: FAILED: building the local Kubernetes binaries failed (see the go output above)" >&2' ERR
start=$(date +%s)
pkgs=()
for b in "${missing[@]}"; do pkgs+=("${pkg[$b]}"); done
# etcd's main package is the module root, whose binary name would be "v3": build it
# on its own with -o, the others together (so they share compiled packages).
export CGO_ENABLED=0
# Stamp the release version (as the Kubernetes release build does) so that
# `kubectl version` and /version report it rather than v0.0.0-master.
minor="$(echo "$version" | cut -d. -f2)"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
if [[ " ${missing[*]} " == *" etcd "* ]]; then
  go build -trimpath -ldflags="$ldflags" -o "$tmp/etcd" "${pkg[etcd]}"
fi
others=()
for b in "${missing[@]}"; do [[ "$b" == etcd ]] || others+=("${pkg[$b]}"); done
if [[ ${#others[@]} -gt 0 ]]; then
  go build -trimpath -ldflags="$ldflags" -o "$tmp/" "${others[@]}"
fi
for b in "${missing[@]}"; do
  if [[ ! -x "$tmp/$b" ]]; then
    echo "k8s-bins: FAILED: the build produced no $b" >&2
    exit 1
  fi
  mv -f "$tmp/$b" "$dest/$b"
done
end=$(date +%s)
echo "k8s-bins: built ${missing[*]} in $((end - start)) s into $dest"
"$dest/kube-apiserver" --version 2>/dev/null || true
