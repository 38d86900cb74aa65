// Where the control plane binaries are: $KUBEBUILDER_ASSETS first (envtest's layout:
// etcd, kube-apiserver, kubectl; it has no kube-controller-manager), then the cache that
// `make k8s-bins` fills: ${ATLANTIS_K8S_CACHE:-~/.cache/atlantis-operator/k8s}/<version>/.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export type BinaryName = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kubectl';
export const BINARIES: BinaryName[] = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kubectl'];

/** The k8s.io/kubernetes version pinned in hack/k8s/go.mod, e.g. "v1.37.2". */
export function pinnedKubernetesVersion(): string {
  const gomod = fs.readFileSync(path.join(repoRoot, 'hack/k8s/go.mod'), 'utf8');
  const m = /^\s*k8s\.io\/kubernetes\s+(v\S+)/m.exec(gomod);
  if (!m?.[1]) throw new Error('Cannot read the k8s.io/kubernetes version from hack/k8s/go.mod');
  return m[1];
}

export function cacheDir(): string {
  const root = process.env.ATLANTIS_K8S_CACHE || path.join(os.homedir(), '.cache/atlantis-operator/k8s');
  return path.join(root, pinnedKubernetesVersion());
}

function executable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** Absolute paths of the four binaries; throws a loud, actionable error when one is missing. */
export function resolveBinaries(): Record<BinaryName, string> {
  const assets = process.env.KUBEBUILDER_ASSETS;
  const cache = cacheDir();
  const out = {} as Record<BinaryName, string>;
  const missing: string[] = [];
  for (const b of BINARIES) {
    const candidates = [...(assets ? [path.join(assets, b)] : []), path.join(cache, b)];
    const found = candidates.find(executable);
    if (found) out[b] = found;
    else missing.push(`${b} (looked in ${candidates.join(', ')})`);
  }
  if (missing.length > 0) {
    throw new Error(
      `Local Kubernetes binaries missing: ${missing.join('; ')}. Build them with \`make k8s-bins\` (see docs/local-cluster.md).`,
    );
  }
  return out;
}
