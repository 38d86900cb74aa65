#!/usr/bin/env bash
# Builds hack/kstatus (kstatus, Flux's wait and a gopher-lua health runner, for
# test/gitops-status.test.ts) from its pinned Go modules into
#   ${ATLANTIS_GOTOOLS_CACHE:-$HOME/.cache/atlantis-operator/gotools}/<hash>/kstatus
# where <hash> covers go.mod, go.sum and the sources, so a change to any of them builds anew
# and an unchanged tree reuses the binary. Prints the binary's path on its last line.
# Any failure exits non-zero with the reason, so `make kstatus-bin` / `make test` fail loudly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "kstatus-bin: FAILED: no 'go' command found (need Go >= 1.26)" >&2
  exit 1
fi

hash="$(cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)"
dest="${ATLANTIS_GOTOOLS_CACHE:-$HOME/.cache/atlantis-operator/gotools}/$hash"
bin="$dest/kstatus"
if [[ -x "$bin" ]]; then
  echo "kstatus-bin: present in $dest" >&2
  echo "$bin"
  exit 0
fi

echo "kstatus-bin: building into $dest (a cold build takes a few minutes on 2 cores)" >&2
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
trap 'echo "kstatus-bin: FAILED: building hack/kstatus failed (see the go output above)" >&2' ERR
start=$(date +%s)
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/kstatus" . >&2
mv -f "$tmp/kstatus" "$bin"
echo "kstatus-bin: built in $(($(date +%s) - start)) s" >&2
echo "$bin"
