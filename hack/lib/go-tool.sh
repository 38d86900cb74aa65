# Shared by hack/{tofu,conftest,gitea,provider}/build.sh: each builds one tool from the pinned
# Go modules of its own folder into
#   ${ATLANTIS_TOOLS_CACHE:-$HOME/.cache/atlantis-operator}/<tool>/<version>-<hash>/
# where <hash> covers the folder's go.mod, go.sum and any sources, so a change to them builds
# anew and an unchanged tree reuses what is there. A script prints the cached path on its
# last stdout line (everything else goes to stderr) so tests can find it by running the script.
# Sourced, not run: the caller sets `tool` (its name in messages and in the cache path).

fail() {
  echo "$tool-bin: FAILED: $*" >&2
  exit 1
}

say() { echo "$tool-bin: $*" >&2; }

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || fail "no 'go' command found (need Go >= 1.26 to build $tool)"
# The wrappers pin exactly the versions upstream chose; never let the go command pick others.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"
export CGO_ENABLED=0

# A module's version in ./go.mod, in a require block or on a single require line.
modver() { awk -v m="$1" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' go.mod; }

# tool_dest VERSION FILE...: the cache dir for this version and these inputs.
tool_dest() {
  local version="$1"
  shift
  local hash
  hash="$(cat "$@" | sha256sum | cut -c1-12)"
  echo "${ATLANTIS_TOOLS_CACHE:-$HOME/.cache/atlantis-operator}/$tool/$version-$hash"
}

# timed_build LABEL CMD...: runs CMD niced, then says its wall and CPU seconds (user+sys of
# the go command and all it ran), the figures docs/test-tools.md quotes for a cold build.
timed_build() {
  local label="$1"
  shift
  local tf
  tf="$(mktemp)"
  if ! /usr/bin/time -f '%e %U %S %M' -o "$tf" nice "$@" >&2; then
    rm -f "$tf"
    return 1
  fi
  read -r wall user sys rss <"$tf"
  rm -f "$tf"
  say "built $label: wall ${wall} s, CPU $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f", u + s }') s, peak RSS of one process $((rss / 1024)) MiB"
}
