#!/usr/bin/env bash
# Debian's Chromium for the browser tests (test/web-browser*.test.ts drive it with
# playwright-core, which downloads no browser of its own). Nothing to do when
# /usr/bin/chromium is there; as root, installs it with apt-get; otherwise says what is missing.
# A font comes with it: without one the screenshots the tests save show no text.
set -euo pipefail

if [[ -x /usr/bin/chromium ]] && fc-list 2>/dev/null | grep -q .; then
  exit 0
fi

if [[ "$(id -u)" != 0 ]]; then
  echo 'chromium is missing: install the Debian packages chromium and fonts-dejavu-core (apt-get install -y chromium fonts-dejavu-core)' >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
packages=(chromium fonts-dejavu-core)

# apt-get update once, only when there are no package lists yet or the install fails on stale ones.
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
  apt-get update -qq
  updated=1
fi
if ! apt-get install -y -qq --no-install-recommends "${packages[@]}"; then
  if [[ -n "${updated:-}" ]]; then exit 1; fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi

test -x /usr/bin/chromium
