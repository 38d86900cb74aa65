#!/usr/bin/env bash
# redis-server for the tests, the bench and the demo (the Debian package). Nothing to do when
# it is on PATH; as root, installs it with apt-get; otherwise says what is missing.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi

if [[ "$(id -u)" != 0 ]]; then
  echo 'redis-server is missing: install the Debian package redis-server (apt-get install -y redis-server)' >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# The tests start their own redis-server: keep the package's service from being started by
# its postinst (policy-rc.d 101 = "not allowed"), and stop it if it was started anyway.
policy=/usr/sbin/policy-rc.d
own_policy=
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  own_policy=1
fi
cleanup() { if [[ -n "$own_policy" ]]; then rm -f "$policy"; fi; }
trap cleanup EXIT

# apt-get update once, only when there are no package lists yet or the install fails on stale ones.
if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
  apt-get update -qq
  updated=1
fi
if ! apt-get install -y -qq --no-install-recommends redis-server; then
  if [[ -n "${updated:-}" ]]; then exit 1; fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends redis-server
fi

if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
  systemctl disable --now redis-server >/dev/null 2>&1 || true
elif command -v service >/dev/null 2>&1; then
  service redis-server stop >/dev/null 2>&1 || true
fi

command -v redis-server >/dev/null
