// The real helm that `make helm-bin` builds (hack/helm/build.sh) and how the chart's tests run
// it: each runner has its own HELM_CONFIG_HOME / CACHE / DATA under a temp dir (never the
// user's ~/.config/helm), and a kubeconfig only when it talks to a cluster.
//
// Also the workload controllers a chart install needs: the shared local cluster runs no
// Deployment or ReplicaSet controller (other tests make controller pods from a Deployment's
// template by hand, docs/local-cluster.md), so the install test starts its own cluster and a
// second kube-controller-manager with just those two controllers.
import fs from 'node:fs';
import { closeSync, openSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { parseAllDocuments, stringify } from 'yaml';
import { resolveBinaries } from '../../dev/binaries.js';
import type { LocalCluster } from '../../dev/cluster.js';
import { type GroupProcess, spawnGroup } from '../../dev/procs.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CHART_DIR = path.join(repoRoot, 'charts/atlantis-operator');

export type KObj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: unknown;
};

/** The helm.sh/helm/v3 version pinned in hack/helm/go.mod, e.g. "v3.22.0". */
export function pinnedHelmVersion(): string {
  const gomod = fs.readFileSync(path.join(repoRoot, 'hack/helm/go.mod'), 'utf8');
  const m = /^\s*(?:require\s+)?helm\.sh\/helm\/v3\s+(v\S+)/m.exec(gomod);
  if (!m?.[1]) throw new Error('Cannot read the helm.sh/helm/v3 version from hack/helm/go.mod');
  return m[1];
}

/** Absolute path of the cached helm; throws, saying how to build it, when it is missing. */
export function helmBinary(): string {
  const root = process.env.ATLANTIS_HELM_CACHE || path.join(os.homedir(), '.cache/atlantis-operator/helm');
  const bin = path.join(root, pinnedHelmVersion(), 'helm');
  try {
    fs.accessSync(bin, fs.constants.X_OK);
  } catch {
    throw new Error(`helm is missing at ${bin}: build it with \`make helm-bin\` (make test does it; hack/helm/build.sh)`);
  }
  return bin;
}

export interface HelmResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface Helm {
  run(args: string[], opts?: { timeoutMs?: number }): Promise<HelmResult>;
  /** Writes values (JSON is YAML) to a file for `-f`. */
  valuesFile(values: unknown): string;
  /** Removes the runner's temp dir. */
  cleanup(): void;
}

export function helmRunner(opts: { kubeconfig?: string } = {}): Helm {
  const bin = helmBinary();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'atlantis-helm-'));
  let files = 0;
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    HELM_CONFIG_HOME: path.join(home, 'config'),
    HELM_CACHE_HOME: path.join(home, 'cache'),
    HELM_DATA_HOME: path.join(home, 'data'),
    // Without a cluster helm must not read one from anywhere.
    KUBECONFIG: opts.kubeconfig ?? path.join(home, 'no-kubeconfig'),
  };
  return {
    async run(args, o = {}) {
      const r = await execa(bin, args, { env, extendEnv: false, reject: false, timeout: o.timeoutMs ?? 60_000 });
      return { stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), exitCode: r.exitCode ?? 1 };
    },
    valuesFile(values) {
      const f = path.join(home, `values-${++files}.yaml`);
      fs.writeFileSync(f, stringify(values));
      return f;
    },
    cleanup() {
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

/** Parses a multi-document YAML stream (helm template, kubectl kustomize) into objects. */
export function parseObjects(text: string): KObj[] {
  return parseAllDocuments(text)
    .map((d) => d.toJSON() as KObj | null)
    .filter((o): o is KObj => o !== null && typeof o === 'object');
}

/** `helm template` of the chart; throws with helm's stderr when it fails. */
export async function renderChart(
  helm: Helm,
  values: unknown = {},
  opts: { release?: string; namespace?: string; includeCrds?: boolean } = {},
): Promise<KObj[]> {
  const r = await renderChartRaw(helm, values, opts);
  if (r.exitCode !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return parseObjects(r.stdout);
}

export function renderChartRaw(
  helm: Helm,
  values: unknown = {},
  opts: { release?: string; namespace?: string; includeCrds?: boolean } = {},
): Promise<HelmResult> {
  return helm.run([
    'template',
    opts.release ?? 'atlantis-operator',
    CHART_DIR,
    '--namespace',
    opts.namespace ?? 'atlantis-operator',
    '-f',
    helm.valuesFile(values),
    ...(opts.includeCrds ? ['--include-crds'] : []),
  ]);
}

/**
 * kube-controller-manager with only the Deployment and ReplicaSet controllers, against a
 * cluster of the test's own (never the shared one: it would act on every test's Deployments).
 */
export function startWorkloadControllers(cluster: LocalCluster): GroupProcess {
  const log = path.join(cluster.dir, 'logs', 'kube-controller-manager-workloads.log');
  const fd = openSync(log, 'a');
  const proc = spawnGroup(
    resolveBinaries()['kube-controller-manager'],
    [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      '--leader-elect=false',
      '--controllers=deployment-controller,replicaset-controller',
      '--secure-port=0',
    ],
    { stdio: ['ignore', fd, fd], cwd: cluster.dir },
  );
  closeSync(fd);
  return proc;
}
