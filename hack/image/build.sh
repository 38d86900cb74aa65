#!/usr/bin/env bash
# make image: builds the repository's Dockerfile, unchanged, with buildah into local container
# storage (where podman runs it) as localhost/atlantis-operator:<package.json version>
# (override with IMAGE=...). Cached: the image carries a label with a hash of its inputs (the
# files the Dockerfile copies, the Dockerfile, the base image's ID, terraform's version and
# checksum), and an image whose label matches is not built again.
#
# This machine reaches no registry and no terraform release host, so by default:
#   - the base image (the Dockerfile's BASE_IMAGE) is built from Debian packages when it is not
#     in local storage (hack/image/base.sh; IMAGE_BASE=pull pulls it instead);
#   - terraform comes from a mirror on 127.0.0.1 serving the terraform installed here as a
#     release zip with its SHA256SUMS, signed by a key made for this mirror, whose URL and
#     fingerprint are passed as build arguments: the Dockerfile checks the signature and the
#     checksum exactly as it does for HashiCorp's release. TERRAFORM_RELEASES_URL (and
#     TERRAFORM_PGP_KEY_URL, TERRAFORM_PGP_FINGERPRINT where the mirror re-signs) point the
#     build at a mirror of your own instead;
#   - tofu and conftest likewise come from a second mirror serving the ones built from their Go
#     modules (hack/tofu, hack/conftest; docs/test-tools.md) as releases at the Dockerfile's
#     pinned versions: tofu's SHA256SUMS signed by that mirror's key, conftest's checksums.txt.
#     TOFU_RELEASES_URL (TOFU_PGP_KEY_URL, TOFU_PGP_FINGERPRINT) and CONFTEST_RELEASES_URL
#     point the build at mirrors of your own instead.
# Builds use the host's network (apt and npm inside the build reach their registries, and the
# mirror is on the host's loopback) and ulimits this machine kind allows (see docs/image.md).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"

fail() {
  echo "image: FAILED: $*" >&2
  exit 1
}

bash hack/deps/containers.sh
command -v flock >/dev/null || fail "flock (util-linux) is missing"

version="$(node -p 'require("./package.json").version')"
image="${IMAGE:-localhost/atlantis-operator:$version}"
cache="${ATLANTIS_IMAGE_CACHE:-$HOME/.cache/atlantis-operator/image}"
mkdir -p "$cache"
# One build at a time on this machine (test files and make targets may ask at once).
exec 9>"$cache/.lock"
flock 9

arg_default() { awk -F= -v a="$1" '$1 == "ARG " a { print $2; exit }' Dockerfile; }
base="$(arg_default BASE_IMAGE)"
[[ -n "$base" ]] || fail "no ARG BASE_IMAGE=... default in the Dockerfile"
bash hack/image/base.sh "$base"
base_id="$(podman image inspect --format '{{.Id}}' "$base")" || fail "cannot inspect the base image $base"

tf_version="$(arg_default TERRAFORM_VERSION)"
build_args=()
if [[ -n "${TERRAFORM_RELEASES_URL:-}" ]]; then
  tf_input="url=$TERRAFORM_RELEASES_URL key=${TERRAFORM_PGP_KEY_URL:-} fpr=${TERRAFORM_PGP_FINGERPRINT:-}"
  build_args+=(--build-arg "TERRAFORM_RELEASES_URL=$TERRAFORM_RELEASES_URL")
  [[ -z "${TERRAFORM_PGP_KEY_URL:-}" ]] || build_args+=(--build-arg "TERRAFORM_PGP_KEY_URL=$TERRAFORM_PGP_KEY_URL")
  [[ -z "${TERRAFORM_PGP_FINGERPRINT:-}" ]] || build_args+=(--build-arg "TERRAFORM_PGP_FINGERPRINT=$TERRAFORM_PGP_FINGERPRINT")
else
  tf_bin="$(command -v terraform)" || fail "no terraform on PATH to serve as the image's terraform mirror"
  have="$("$tf_bin" version -json 2>/dev/null | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).terraform_version))')"
  if [[ "$have" != "$tf_version" ]]; then
    echo "image: note: the Dockerfile pins terraform $tf_version; this build mirrors the installed $have" >&2
    tf_version="$have"
    build_args+=(--build-arg "TERRAFORM_VERSION=$tf_version")
  fi
  tf_sum="$(sha256sum "$tf_bin" | cut -c1-64)"
  tf_input="mirror=$tf_version sha256=$tf_sum"
  mirror="$cache/terraform-mirror/${tf_version}-${tf_sum:0:12}"
  if [[ ! -s "$mirror/pgp-key.txt" ]]; then
    # A release laid out as HashiCorp's: <v>/terraform_<v>_linux_<arch>.zip, _SHA256SUMS and its
    # detached signature; the signing key is this mirror's own, kept with it (stable build args).
    rm -rf "$mirror" && mkdir -p "$mirror/terraform/$tf_version"
    rel="$mirror/terraform/$tf_version"
    stage="$(mktemp -d)"
    cp "$tf_bin" "$stage/terraform" && touch -d @0 "$stage/terraform"
    (cd "$stage" && zip -q -X "$rel/terraform_${tf_version}_linux_amd64.zip" terraform)
    (cd "$rel" && sha256sum "terraform_${tf_version}_linux_amd64.zip" >"terraform_${tf_version}_SHA256SUMS")
    export GNUPGHOME="$stage/gnupg"
    mkdir -m 0700 "$GNUPGHOME"
    gpg --batch --quiet --passphrase '' --quick-gen-key 'atlantis-operator local terraform mirror' ed25519 sign never
    gpg --batch --quiet --detach-sign -o "$rel/terraform_${tf_version}_SHA256SUMS.sig" "$rel/terraform_${tf_version}_SHA256SUMS"
    gpg --batch --armor --export >"$mirror/pgp-key.txt.tmp"
    gpg --batch --with-colons --list-keys | awk -F: '$1 == "fpr" { print $10; exit }' >"$mirror/fingerprint"
    unset GNUPGHOME
    rm -rf "$stage"
    mv "$mirror/pgp-key.txt.tmp" "$mirror/pgp-key.txt"
  fi
fi

# tofu and conftest: the releases the Dockerfile pins, from the Go-module builds of this
# repository (whose versions the Dockerfile's must match), unless mirrors of your own are given.
tofu_version="$(arg_default TOFU_VERSION)"
conftest_version="$(arg_default CONFTEST_VERSION)"
tools_input="tofu=${TOFU_RELEASES_URL:-} conftest=${CONFTEST_RELEASES_URL:-}"
tools=
if [[ -z "${TOFU_RELEASES_URL:-}" || -z "${CONFTEST_RELEASES_URL:-}" ]]; then
  tofu_bin="$(bash hack/tofu/build.sh | tail -1)" || fail "hack/tofu/build.sh failed"
  conftest_bin="$(bash hack/conftest/build.sh | tail -1)" || fail "hack/conftest/build.sh failed"
  # Output read whole before it is searched: `grep -q` stops reading at its match, and under
  # pipefail the writer's SIGPIPE would fail the check (it did with a CLI config warning first).
  tofu_says="$(TF_CLI_CONFIG_FILE=/dev/null "$tofu_bin" version 2>/dev/null)" || fail "$tofu_bin does not run"
  grep -q "^OpenTofu v${tofu_version}\$" <<<"$tofu_says" || fail "the Dockerfile pins tofu $tofu_version; hack/tofu builds $(head -1 <<<"$tofu_says")"
  conftest_says="$(HOME="$(mktemp -d)" "$conftest_bin" --version)" || fail "$conftest_bin does not run"
  grep -q "^Conftest: ${conftest_version}\$" <<<"$conftest_says" || fail "the Dockerfile pins conftest $conftest_version; hack/conftest builds another"
  tofu_sum="$(sha256sum "$tofu_bin" | cut -c1-64)"
  conftest_sum="$(sha256sum "$conftest_bin" | cut -c1-64)"
  tools_input="$tools_input tofu-sha256=$tofu_sum conftest-sha256=$conftest_sum"
  tools="$cache/tools-mirror/${tofu_version}-${tofu_sum:0:12}-${conftest_version}-${conftest_sum:0:12}"
  if [[ ! -s "$tools/pgp-key.txt" ]]; then
    rm -rf "$tools" && mkdir -p "$tools/tofu/v$tofu_version" "$tools/conftest/v$conftest_version"
    stage="$(mktemp -d)"
    cp "$tofu_bin" "$stage/tofu" && cp "$conftest_bin" "$stage/conftest" && touch -d @0 "$stage/tofu" "$stage/conftest"
    trel="$tools/tofu/v$tofu_version"
    tar --owner=0 --group=0 --mtime=@0 -czf "$trel/tofu_${tofu_version}_linux_amd64.tar.gz" -C "$stage" tofu
    (cd "$trel" && sha256sum "tofu_${tofu_version}_linux_amd64.tar.gz" >"tofu_${tofu_version}_SHA256SUMS")
    crel="$tools/conftest/v$conftest_version"
    tar --owner=0 --group=0 --mtime=@0 -czf "$crel/conftest_${conftest_version}_Linux_x86_64.tar.gz" -C "$stage" conftest
    (cd "$crel" && sha256sum "conftest_${conftest_version}_Linux_x86_64.tar.gz" >checksums.txt)
    export GNUPGHOME="$stage/gnupg"
    mkdir -m 0700 "$GNUPGHOME"
    gpg --batch --quiet --passphrase '' --quick-gen-key 'atlantis-operator local tofu mirror' ed25519 sign never
    gpg --batch --quiet --detach-sign -o "$trel/tofu_${tofu_version}_SHA256SUMS.gpgsig" "$trel/tofu_${tofu_version}_SHA256SUMS"
    gpg --batch --armor --export >"$tools/pgp-key.txt.tmp"
    gpg --batch --with-colons --list-keys | awk -F: '$1 == "fpr" { print $10; exit }' >"$tools/fingerprint"
    unset GNUPGHOME
    rm -rf "$stage"
    mv "$tools/pgp-key.txt.tmp" "$tools/pgp-key.txt"
  fi
fi

# The inputs: every file the Dockerfile copies (.dockerignore's allowlist), the Dockerfile, the
# base image, terraform, tofu and conftest.
inputs="$( {
  echo "image=$image base=$base_id terraform=$tf_input $tools_input"
  sha256sum Dockerfile .dockerignore package.json package-lock.json tsconfig.json hack/bundle.mjs hack/image/runtime-tree.mjs
  find src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-32)"
have_inputs="$(podman image inspect --format '{{index .Labels "dev.atlantis-operator.inputs"}}' "$image" 2>/dev/null || true)"
if [[ "$have_inputs" == "$inputs" ]]; then
  echo "image: $image is up to date (inputs $inputs)"
  exit 0
fi

mirror_pids=()
cleanup() { for pid in "${mirror_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
# Serves a dir on 127.0.0.1 (hack/image/mirror.mjs) and sets `url` to its base URL.
serve() {
  local url_file
  url_file="$(mktemp)"
  node hack/image/mirror.mjs "$1" >"$url_file" &
  mirror_pids+=($!)
  for _ in $(seq 100); do [[ -s "$url_file" ]] && break; sleep 0.1; done
  url="$(head -1 "$url_file")"
  rm -f "$url_file"
  [[ "$url" == http://127.0.0.1:* ]] || fail "the mirror of $1 did not start"
}
if [[ -n "${mirror:-}" ]]; then
  serve "$mirror"
  build_args+=(
    --build-arg "TERRAFORM_RELEASES_URL=$url/terraform"
    --build-arg "TERRAFORM_PGP_KEY_URL=$url/pgp-key.txt"
    --build-arg "TERRAFORM_PGP_FINGERPRINT=$(cat "$mirror/fingerprint")"
  )
fi
if [[ -n "$tools" ]]; then
  serve "$tools"
  if [[ -z "${TOFU_RELEASES_URL:-}" ]]; then
    build_args+=(
      --build-arg "TOFU_RELEASES_URL=$url/tofu"
      --build-arg "TOFU_PGP_KEY_URL=$url/pgp-key.txt"
      --build-arg "TOFU_PGP_FINGERPRINT=$(cat "$tools/fingerprint")"
    )
  fi
  [[ -n "${CONFTEST_RELEASES_URL:-}" ]] || build_args+=(--build-arg "CONFTEST_RELEASES_URL=$url/conftest")
fi
[[ -z "${TOFU_RELEASES_URL:-}" ]] || build_args+=(--build-arg "TOFU_RELEASES_URL=$TOFU_RELEASES_URL")
[[ -z "${TOFU_PGP_KEY_URL:-}" ]] || build_args+=(--build-arg "TOFU_PGP_KEY_URL=$TOFU_PGP_KEY_URL")
[[ -z "${TOFU_PGP_FINGERPRINT:-}" ]] || build_args+=(--build-arg "TOFU_PGP_FINGERPRINT=$TOFU_PGP_FINGERPRINT")
[[ -z "${CONFTEST_RELEASES_URL:-}" ]] || build_args+=(--build-arg "CONFTEST_RELEASES_URL=$CONFTEST_RELEASES_URL")

# A proxy CA this machine's own downloads trust (NODE_EXTRA_CA_CERTS) goes to the build as the
# Dockerfile's `extra_ca` secret: the build's npm and curl use it, no layer keeps it.
extra_ca="${IMAGE_EXTRA_CA:-${NODE_EXTRA_CA_CERTS:-}}"
if [[ -n "$extra_ca" && -s "$extra_ca" ]]; then build_args+=(--secret "id=extra_ca,src=$extra_ca"); fi

echo "image: building $image (inputs $inputs)"
start=$(date +%s)
nice buildah bud --layers --network host \
  --ulimit nofile=16384:16384 --ulimit nproc=8192:8192 \
  "${build_args[@]}" \
  --label "dev.atlantis-operator.inputs=$inputs" \
  --label "org.opencontainers.image.version=$version" \
  -t "$image" -f Dockerfile . || fail "buildah bud failed (see its output above)"
size="$(podman image inspect --format '{{.Size}}' "$image")"
echo "image: built $image in $(($(date +%s) - start)) s, $((size / 1024 / 1024)) MiB"
