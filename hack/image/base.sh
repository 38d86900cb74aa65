#!/usr/bin/env bash
# The Dockerfile's base image in local container storage, under the name its FROM uses:
#   hack/image/base.sh debian:trixie-slim
# Present already: nothing to do. IMAGE_BASE=pull: `podman pull` it (a machine with a registry).
# Otherwise (default; this machine reaches only package registries) it is built from Debian's
# packages with mmdebstrap, as the official slim image is: the minbase variant (Essential +
# apt) of the suite the tag names, with the slim image's dpkg excludes (no docs, man pages or
# translations beyond the copyright files), then imported under the same name, so the
# Dockerfile builds unchanged.
set -euo pipefail

ref="${1:?usage: base.sh <image, e.g. debian:trixie-slim>}"
fail() {
  echo "image: FAILED: $*" >&2
  exit 1
}

if podman image exists "$ref"; then
  exit 0
fi
if [[ "${IMAGE_BASE:-build}" == pull ]]; then
  podman pull --quiet "$ref" >/dev/null || fail "podman pull $ref failed"
  exit 0
fi

[[ "$ref" =~ ^(docker\.io/)?(library/)?debian:([a-z]+)(-slim)?$ ]] ||
  fail "cannot build base image $ref from Debian packages (only debian:<suite>[-slim]); pull it, or set IMAGE_BASE=pull"
suite="${BASH_REMATCH[3]}"
name="docker.io/library/debian:$suite${BASH_REMATCH[4]}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "image: building base $name from Debian packages (mmdebstrap --variant=minbase $suite)"
excludes=(
  'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright'
  'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/groff/*' 'path-exclude=/usr/share/info/*'
  'path-exclude=/usr/share/lintian/*' 'path-exclude=/usr/share/linda/*'
  'path-exclude=/usr/share/locale/*' 'path-include=/usr/share/locale/locale.alias'
)
dpkgopts=()
for e in "${excludes[@]}"; do dpkgopts+=(--dpkgopt="$e"); done
nice mmdebstrap --quiet --variant=minbase --format=tar "${dpkgopts[@]}" "$suite" "$tmp/rootfs.tar" \
  "deb http://deb.debian.org/debian $suite main" \
  "deb http://deb.debian.org/debian $suite-updates main" \
  "deb http://deb.debian.org/debian-security $suite-security main" ||
  fail "mmdebstrap of $suite failed (see its output above)"
podman import --quiet \
  --change 'CMD ["bash"]' \
  --change "LABEL dev.atlantis-operator.base=mmdebstrap-minbase-$suite" \
  "$tmp/rootfs.tar" "$name" >/dev/null || fail "podman import of $name failed"
echo "image: base $name built in $(($(date +%s) - start)) s"
