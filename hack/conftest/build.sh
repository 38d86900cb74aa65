#!/usr/bin/env bash
# Builds conftest from the pinned Go modules in this folder (a wrapper that requires
# github.com/open-policy-agent/conftest and adds nothing, so the build list is upstream's, as
# a plain `go install` would select) into the cache (hack/lib/go-tool.sh), with the version
# stamped as upstream's release build does. Prints the binary's path on its last line; a
# cached one is not rebuilt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
tool=conftest
# shellcheck source=../lib/go-tool.sh
source ../lib/go-tool.sh

version="$(modver github.com/open-policy-agent/conftest)"
[[ -n "$version" ]] || fail "cannot read the github.com/open-policy-agent/conftest version from $here/go.mod"
dest="$(tool_dest "$version" go.mod go.sum)"
if [[ -x "$dest/conftest" ]]; then
  say "conftest $version present in $dest"
  echo "$dest/conftest"
  exit 0
fi

say "building conftest $version into $dest (a cold build takes 3 to 6 minutes on 2 cores; later runs reuse it)"
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Upstream's releases print the version without its leading v.
timed_build "conftest $version" go build -trimpath \
  -ldflags="-s -w -X github.com/open-policy-agent/conftest/internal/version.Version=${version#v}" \
  -o "$tmp/conftest" github.com/open-policy-agent/conftest || fail "go build of conftest $version failed (see the go output above)"
got="$("$tmp/conftest" --version 2>&1 | head -1)" || fail "the built conftest does not run: $got"
[[ "$got" == *"${version#v}"* ]] || fail "the built conftest reports '$got', expected version ${version#v}"
mv -f "$tmp/conftest" "$dest/conftest"
echo "$dest/conftest"
