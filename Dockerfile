# syntax=docker/dockerfile:1
# atlantis-operator image: the server and the controller in one binary (docs/image.md).
#   docker build -t atlantis-operator:dev .        or        buildah bud -t atlantis-operator:dev .
#   make image    builds it here, where no registry and no release host can be reached (hack/image/)
# Stages: `build` bundles the CLI and compiles the SQLite addon and the process host worker, `terraform`, `tofu` and
# `conftest` fetch and verify those tools, the last stage carries only what runs: Debian's
# Node.js, tini, git, ssh, the bundle, the addon, terraform, OpenTofu's tofu and conftest (for
# policy checks). No compiler, no npm, no dev dependencies.

# Debian trixie: its nodejs (20.19) meets package.json's engines (>=20.5 <25).
ARG BASE_IMAGE=debian:trixie-slim

FROM ${BASE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm libnode-dev python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
# The addon is compiled from the source in its npm tarball (checked against the lockfile's
# integrity) with Debian's Node.js headers, never a prebuilt binary fetched from elsewhere.
# Behind a proxy that intercepts TLS, give its CA as the build secret `extra_ca`
# (docker build --secret id=extra_ca,src=proxy-ca.pem): only these downloads see it, no layer.
ENV npm_config_build_from_source=true npm_config_nodedir=/usr
RUN --mount=type=secret,id=extra_ca,required=false \
    if [ -s /run/secrets/extra_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/extra_ca; fi \
 && npm ci --no-audit --no-fund && rm -rf /root/.npm
COPY hack/bundle.mjs ./hack/
COPY hack/bundle ./hack/bundle
COPY hack/image/runtime-tree.mjs ./hack/image/
COPY tsconfig.json ./
COPY src ./src
# Type-checking is `make build`'s job; here the bundle is all that runs (hack/bundle.mjs).
# hack/bundle.mjs ends by starting a server once, on loopback, to make V8's code cache of the
# bundle with this stage's Node.js, the final stage's (hack/bundle/code-cache.mjs).
# runtime-tree.mjs copies the bundle, its code cache and the few packages it loads at run time
# to /out/app and smoke-tests that tree on its own (the CLI starts, V8 takes the cache, the
# addons load, a server starts and stops, the process host worker runs).
RUN node hack/bundle.mjs && node hack/image/runtime-tree.mjs /out/app

FROM ${BASE_IMAGE} AS terraform
# Pinned; checked against the release's SHA256SUMS, whose signature must be by the key with
# TERRAFORM_PGP_FINGERPRINT (HashiCorp's release key). A mirror of the release host works
# through TERRAFORM_RELEASES_URL; a mirror that re-signs (its own builds) gives its key's URL
# and fingerprint.
ARG TERRAFORM_VERSION=1.11.4
ARG TERRAFORM_RELEASES_URL=https://releases.hashicorp.com/terraform
ARG TERRAFORM_PGP_KEY_URL=https://www.hashicorp.com/.well-known/pgp-key.txt
ARG TERRAFORM_PGP_FINGERPRINT=C874011F0AB405110D02105534365D9472D7468F
ARG TARGETARCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl unzip gpg gpgv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /tf
RUN --mount=type=secret,id=extra_ca,required=false set -eu; \
    if [ -s /run/secrets/extra_ca ]; then \
      cat /etc/ssl/certs/ca-certificates.crt /run/secrets/extra_ca > /tf/ca.pem; export CURL_CA_BUNDLE=/tf/ca.pem; \
    fi; \
    arch="${TARGETARCH:-$(dpkg --print-architecture)}"; \
    zip="terraform_${TERRAFORM_VERSION}_linux_${arch}.zip"; \
    base="${TERRAFORM_RELEASES_URL%/}/${TERRAFORM_VERSION}"; \
    curl -fsSL --retry 3 -o "$zip" "$base/$zip"; \
    curl -fsSL --retry 3 -o SHA256SUMS "$base/terraform_${TERRAFORM_VERSION}_SHA256SUMS"; \
    curl -fsSL --retry 3 -o SHA256SUMS.sig "$base/terraform_${TERRAFORM_VERSION}_SHA256SUMS.sig"; \
    curl -fsSL --retry 3 -o key.asc "$TERRAFORM_PGP_KEY_URL"; \
    gpg --batch --dearmor < key.asc > key.gpg; \
    gpgv --status-fd 1 --keyring /tf/key.gpg SHA256SUMS.sig SHA256SUMS > gpgv.status; \
    want="$(echo "$TERRAFORM_PGP_FINGERPRINT" | tr -d ' ' | tr a-f A-F)"; \
    awk -v want="$want" '$2 == "VALIDSIG" && ($3 == want || $NF == want) { ok = 1 } END { exit !ok }' gpgv.status \
      || { echo "SHA256SUMS is not signed by $want" >&2; cat gpgv.status >&2; exit 1; }; \
    grep -E "^[0-9a-f]{64}  ${zip}\$" SHA256SUMS > ours.sum || { echo "$zip is not in SHA256SUMS" >&2; exit 1; }; \
    sha256sum -c ours.sum; \
    unzip -q "$zip" terraform -d /tf/bin; \
    /tf/bin/terraform version

FROM ${BASE_IMAGE} AS tofu
# Pinned; checked as OpenTofu's downloader (and Atlantis) checks it: tofu_<v>_SHA256SUMS must be
# signed (.gpgsig) by the key with TOFU_PGP_FINGERPRINT (OpenTofu's release key), the tarball
# must match it. A mirror of the release host works through TOFU_RELEASES_URL (<url>/v<v>/...);
# one that re-signs gives its key's URL and fingerprint.
ARG TOFU_VERSION=1.12.6
ARG TOFU_RELEASES_URL=https://github.com/opentofu/opentofu/releases/download
ARG TOFU_PGP_KEY_URL=https://get.opentofu.org/opentofu.asc
ARG TOFU_PGP_FINGERPRINT=E3E6E43D84CB852EADB0051D0C0AF313E5FD9F80
ARG TARGETARCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gpg gpgv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /tofu
RUN --mount=type=secret,id=extra_ca,required=false set -eu; \
    if [ -s /run/secrets/extra_ca ]; then \
      cat /etc/ssl/certs/ca-certificates.crt /run/secrets/extra_ca > /tofu/ca.pem; export CURL_CA_BUNDLE=/tofu/ca.pem; \
    fi; \
    arch="${TARGETARCH:-$(dpkg --print-architecture)}"; \
    tgz="tofu_${TOFU_VERSION}_linux_${arch}.tar.gz"; \
    base="${TOFU_RELEASES_URL%/}/v${TOFU_VERSION}"; \
    curl -fsSL --retry 3 -o "$tgz" "$base/$tgz"; \
    curl -fsSL --retry 3 -o SHA256SUMS "$base/tofu_${TOFU_VERSION}_SHA256SUMS"; \
    curl -fsSL --retry 3 -o SHA256SUMS.gpgsig "$base/tofu_${TOFU_VERSION}_SHA256SUMS.gpgsig"; \
    curl -fsSL --retry 3 -o key.asc "$TOFU_PGP_KEY_URL"; \
    gpg --batch --dearmor < key.asc > key.gpg; \
    gpgv --status-fd 1 --keyring /tofu/key.gpg SHA256SUMS.gpgsig SHA256SUMS > gpgv.status; \
    want="$(echo "$TOFU_PGP_FINGERPRINT" | tr -d ' ' | tr a-f A-F)"; \
    awk -v want="$want" '$2 == "VALIDSIG" && ($3 == want || $NF == want) { ok = 1 } END { exit !ok }' gpgv.status \
      || { echo "SHA256SUMS is not signed by $want" >&2; cat gpgv.status >&2; exit 1; }; \
    grep -E "^[0-9a-f]{64}  ${tgz}\$" SHA256SUMS > ours.sum || { echo "$tgz is not in SHA256SUMS" >&2; exit 1; }; \
    sha256sum -c ours.sum; \
    mkdir -p /tofu/bin && tar -xzf "$tgz" -C /tofu/bin tofu; \
    /tofu/bin/tofu version

FROM ${BASE_IMAGE} AS conftest
# Pinned; conftest releases carry checksums.txt and no signature: the tarball must match it,
# as Atlantis checks its conftest downloads. CONFTEST_RELEASES_URL: a mirror (<url>/v<v>/...).
ARG CONFTEST_VERSION=0.71.1
ARG CONFTEST_RELEASES_URL=https://github.com/open-policy-agent/conftest/releases/download
ARG TARGETARCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /conftest
RUN --mount=type=secret,id=extra_ca,required=false set -eu; \
    if [ -s /run/secrets/extra_ca ]; then \
      cat /etc/ssl/certs/ca-certificates.crt /run/secrets/extra_ca > /conftest/ca.pem; export CURL_CA_BUNDLE=/conftest/ca.pem; \
    fi; \
    arch="${TARGETARCH:-$(dpkg --print-architecture)}"; \
    case "$arch" in amd64) arch=x86_64 ;; arm64) arch=arm64 ;; *) echo "no conftest release for $arch" >&2; exit 1 ;; esac; \
    tgz="conftest_${CONFTEST_VERSION}_Linux_${arch}.tar.gz"; \
    base="${CONFTEST_RELEASES_URL%/}/v${CONFTEST_VERSION}"; \
    curl -fsSL --retry 3 -o "$tgz" "$base/$tgz"; \
    curl -fsSL --retry 3 -o checksums.txt "$base/checksums.txt"; \
    grep -E "^[0-9a-f]{64}  ${tgz}\$" checksums.txt > ours.sum || { echo "$tgz is not in checksums.txt" >&2; exit 1; }; \
    sha256sum -c ours.sum; \
    mkdir -p /conftest/bin && tar -xzf "$tgz" -C /conftest/bin conftest; \
    HOME=/conftest /conftest/bin/conftest --version

FROM ${BASE_IMAGE}
# tini is PID 1: it reaps zombies and passes signals to the server only (no -g): the kubelet's
# SIGTERM starts the drain and never reaches terraform, which the server interrupts itself.
# tini is made execute-only (0711): a process that runs a binary it cannot read is not
# dumpable, so /proc/1/environ (the pod's env, secrets included) is not readable by the
# server's children, which run as the same user (README.md, "Secrets").
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs tini git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
 && chmod 0711 /usr/bin/tini \
 && if ! getent group 1000 >/dev/null; then groupadd --gid 1000 atlantis; fi \
 && useradd --uid 1000 --gid 1000 --home-dir /home/atlantis --create-home --shell /usr/sbin/nologin atlantis \
 && install -d -o 1000 -g 1000 -m 0750 /atlantis
COPY --from=terraform /tf/bin/terraform /usr/local/bin/terraform
COPY --from=tofu /tofu/bin/tofu /usr/local/bin/tofu
COPY --from=conftest /conftest/bin/conftest /usr/local/bin/conftest
COPY --from=build /out/app /app
# `atlantis-operator drain` (the preStop hook) and `atlantis-operator version` on PATH.
RUN ln -s /app/dist/atlantis-operator.cjs /usr/local/bin/atlantis-operator
USER 1000:1000
WORKDIR /home/atlantis
ENV ATLANTIS_DATA_DIR=/atlantis NODE_ENV=production CHECKPOINT_DISABLE=1
EXPOSE 4141 8080
# Node.js flags: none (src/node-args.ts says why), kept equal by test/image.test.ts.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/bin/node", "/app/dist/atlantis-operator.cjs"]
CMD ["server"]
