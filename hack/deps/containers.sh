#!/usr/bin/env bash
# The container tools for `make image` and the container tests (the Debian packages): buildah
# builds the Dockerfile, podman runs its containers with runc (crun refuses this machine kind's
# hybrid cgroups), mmdebstrap builds the base image where none can be pulled, zip and gpg make
# the local terraform mirror, sshd (openssh-server) serves git over SSH to the image's test.
# Nothing to do when all are on PATH; as root, installs them with
# apt-get; otherwise says what is missing.
set -euo pipefail

declare -A package_of=([buildah]=buildah [podman]=podman [runc]=runc [mmdebstrap]=mmdebstrap [zip]=zip [gpg]=gpg [/usr/sbin/sshd]=openssh-server)
missing=()
for tool in "${!package_of[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package_of[$tool]}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ "$(id -u)" != 0 ]]; then
  echo "container tools are missing: install the Debian packages ${missing[*]} (apt-get install -y ${missing[*]})" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# The test starts its own sshd: keep the package's service from being started by its postinst
# (policy-rc.d 101 = "not allowed").
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
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
  apt-get update -qq
  updated=1
fi
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  if [[ -n "${updated:-}" ]]; then exit 1; fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

for tool in "${!package_of[@]}"; do command -v "$tool" >/dev/null; done
