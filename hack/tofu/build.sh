#!/usr/bin/env bash
# Builds OpenTofu's `tofu` from the pinned Go modules in this folder (a wrapper module that
# requires github.com/opentofu/opentofu and repeats its one replace, so the build selects
# exactly upstream's versions) into the cache (hack/lib/go-tool.sh), stamped as a release
# build (version.dev=no, as upstream's release config does) so `tofu version` prints the
# plain version. Prints the binary's path on its last line; a cached one is not rebuilt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
tool=tofu
# shellcheck source=../lib/go-tool.sh
source ../lib/go-tool.sh

version="$(modver github.com/opentofu/opentofu)"
[[ -n "$version" ]] || fail "cannot read the github.com/opentofu/opentofu version from $here/go.mod"
dest="$(tool_dest "$version" go.mod go.sum)"
if [[ -x "$dest/tofu" ]]; then
  say "tofu $version present in $dest"
  echo "$dest/tofu"
  exit 0
fi

say "building tofu $version into $dest (a cold build takes 5 to 10 minutes on 2 cores; later runs reuse it)"
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
timed_build "tofu $version" go build -trimpath -ldflags="-s -w -X github.com/opentofu/opentofu/version.dev=no" \
  -o "$tmp/tofu" github.com/opentofu/opentofu/cmd/tofu || fail "go build of OpenTofu $version failed (see the go output above)"
got="$(TF_CLI_CONFIG_FILE=/dev/null "$tmp/tofu" version 2>&1 | head -1)" || fail "the built tofu does not run: $got"
[[ "$got" == "OpenTofu ${version}" ]] || fail "the built tofu reports '$got', expected 'OpenTofu $version'"
mv -f "$tmp/tofu" "$dest/tofu"
echo "$dest/tofu"
