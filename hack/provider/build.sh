#!/usr/bin/env bash
# Builds terraform-provider-fixture (this folder: a provider for tests made with
# terraform-plugin-framework) into the cache (hack/lib/go-tool.sh), stamped with the version
# in ./VERSION. Prints the binary's path on its last line; a cached one is not rebuilt.
# test/support/provider-mirror.ts packs it as release zips and serves them to terraform and
# tofu through a provider network mirror.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
tool=provider
# shellcheck source=../lib/go-tool.sh
source ../lib/go-tool.sh

version="$(tr -d ' \n' <VERSION)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$here/VERSION holds '$version', not a version like 1.0.0"
dest="$(tool_dest "v$version" go.mod go.sum VERSION ./*.go)"
bin="$dest/terraform-provider-fixture"
if [[ -x "$bin" ]]; then
  say "terraform-provider-fixture $version present in $dest"
  echo "$bin"
  exit 0
fi

say "building terraform-provider-fixture $version into $dest (about a minute cold)"
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
timed_build "terraform-provider-fixture $version" go build -trimpath -ldflags="-s -w -X main.version=$version" \
  -o "$tmp/terraform-provider-fixture" . || fail "go build of hack/provider failed (see the go output above)"
mv -f "$tmp/terraform-provider-fixture" "$bin"
echo "$bin"
