#!/usr/bin/env bash
# Copies the CRDs of crds/ (their one source) into the chart's crds/ directory, which Helm
# reads as it is (never templated). test/helm-chart.test.ts fails while the copies differ.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/charts/atlantis-operator/crds"
mkdir -p "$dest"
find "$dest" -maxdepth 1 -name '*.yaml' -delete
for f in "$root"/crds/*.yaml; do
  [[ "$(basename "$f")" == kustomization.yaml ]] && continue
  cp "$f" "$dest/"
  echo "sync-crd: $(basename "$f") -> charts/atlantis-operator/crds/"
done
