#!/usr/bin/env bash
# Builds Gitea from the pinned Go modules in this folder into the cache
# (hack/lib/go-tool.sh), with the module's options/ dir (translations, licences, gitignore
# templates: read from disk at run time) beside the binary. The wrapper module requires
# gitea.dev (Gitea's name for itself since v1.27), replaces it with code.gitea.io/gitea (the
# path the module proxy serves), repeats Gitea's own four replaces, and was seeded with
# Gitea's go.sum (the checksum database lacks one of its dependencies); the build list equals
# upstream's. Prints the binary's path on its last line; a cached one is not rebuilt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
tool=gitea
# shellcheck source=../lib/go-tool.sh
source ../lib/go-tool.sh

version="$(modver gitea.dev)"
[[ -n "$version" ]] || fail "cannot read the gitea.dev version from $here/go.mod"
dest="$(tool_dest "$version" go.mod go.sum)"
if [[ -x "$dest/gitea" && -d "$dest/options/locale" ]]; then
  say "gitea $version present in $dest"
  echo "$dest/gitea"
  exit 0
fi

say "building gitea $version into $dest (a cold build takes 5 to 10 minutes on 2 cores; later runs reuse it)"
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Upstream's Makefile stamps main.Version without the leading v.
timed_build "gitea $version" go build -trimpath -ldflags="-s -w -X main.Version=${version#v}" -o "$tmp/gitea" gitea.dev ||
  fail "go build of Gitea $version failed (see the go output above)"
got="$("$tmp/gitea" --version 2>&1 | head -1)" || fail "the built gitea does not run: $got"
[[ "$got" == *"version ${version#v} "* ]] || fail "the built gitea reports '$got', expected version ${version#v}"
src="$(go list -m -f '{{if .Replace}}{{.Replace.Dir}}{{else}}{{.Dir}}{{end}}' gitea.dev)"
[[ -d "$src/options/locale" ]] || fail "no options/ dir in the Gitea module at '$src'"
cp -r "$src/options" "$tmp/options"
chmod -R u+w "$tmp/options"
rm -rf "$dest/options"
mv "$tmp/options" "$dest/options"
mv -f "$tmp/gitea" "$dest/gitea"
echo "$dest/gitea"
