// Test helpers for the real local cluster (docs/local-cluster.md).
//
//   const c = await getCluster();            // shared cluster of `make test`, else one for this process
//   const ns = await freshNamespace('ctrl');  // unique namespace with its "default" ServiceAccount
//   const node = await getLocalNode();        // the local node's name, pod dirs, logs, events
//
// Shared: `make test` runs every test file under dev/with-cluster.ts, which starts ONE
// cluster and ONE local node and exports ATLANTIS_TEST_KUBECONFIG / ATLANTIS_TEST_NODE_ROOT /
// ATLANTIS_TEST_NODE_NAME. A test file run on its own (node --import tsx --test x.test.ts)
// gets its own stack, started in a child process (dev/with-cluster.ts --serve) that stops
// when this process exits. Missing binaries make getCluster() throw, so tests fail, never skip.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { type KubeClientConfig, kubeConfigFromFile } from '../../src/k8s/kubeconfig.js';
import { execa } from 'execa';
import { kubeRequest, kubeRequestOk } from '../../src/k8s/client.js';
import { findPodDir, readNodeEvents, type NodeEvent } from '../../dev/local-node/index.js';
import { resolveBinaries } from '../../dev/binaries.js';
import { sleep } from '../../src/async.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface TestCluster {
  kubeconfigPath: string;
  kc: KubeClientConfig;
  /** The same admin kubeconfig as client-node reads it: for tests that need its CA data or client certificate. */
  full: KubeConfig;
  server: string;
  /** true when this is the shared cluster of the whole run */
  shared: boolean;
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<{ stdout: string; stderr: string; exitCode: number }>;
}

export interface LocalNodeHandle {
  name: string;
  root: string;
  /** the node's lifecycle/signal events (from events.jsonl) */
  events(filter?: { namespace?: string; pod?: string }): NodeEvent[];
  podDir(namespace: string, pod: string, uid?: string): string | undefined;
  logPath(namespace: string, pod: string, container: string, uid?: string): string | undefined;
  /** host dir of a PVC bound by the node */
  pvDir(namespace: string, claim: string): string;
}

interface Info {
  kubeconfig: string;
  nodeRoot: string;
  nodeName: string;
}

let infoPromise: Promise<Info> | undefined;
let standalone: ChildProcess | undefined;

function sharedInfo(): Info | undefined {
  const kubeconfig = process.env.ATLANTIS_TEST_KUBECONFIG;
  if (!kubeconfig) return undefined;
  return { kubeconfig, nodeRoot: process.env.ATLANTIS_TEST_NODE_ROOT ?? '', nodeName: process.env.ATLANTIS_TEST_NODE_NAME ?? '' };
}

async function startStandalone(): Promise<Info> {
  resolveBinaries(); // fail at once, with the reason, when the binaries are missing
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'dev/with-cluster.ts'), '--serve'], {
    cwd: repoRoot,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  standalone = child;
  const info = await new Promise<Info>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the local cluster did not start within 120 s')), 120_000);
    child.on('message', (m: { ready?: Info }) => {
      if (m?.ready) {
        clearTimeout(timer);
        resolve(m.ready);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the local cluster failed to start (exit ${code}); see the output above`));
    });
  });
  // Neither the child nor its channel keeps this process alive; when this process exits the
  // channel closes and the child stops the cluster.
  child.unref();
  (child.channel as unknown as { unref?: () => void } | undefined)?.unref?.();
  return info;
}

function info(): Promise<Info> {
  infoPromise ??= (async () => sharedInfo() ?? (await startStandalone()))();
  return infoPromise;
}

let clusterPromise: Promise<TestCluster> | undefined;

/** A kubeconfig file as client-node's KubeConfig reads it (all of its fields, for tests). */
export function clientNodeConfig(file: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return kc;
}

/** A connection to the shared local cluster (or one started for this test process). */
export function getCluster(): Promise<TestCluster> {
  clusterPromise ??= (async () => {
    const i = await info();
    const kc = kubeConfigFromFile(i.kubeconfig);
    const full = clientNodeConfig(i.kubeconfig);
    const server = kc.getCurrentCluster()?.server ?? '';
    const kubectlPath = resolveBinaries().kubectl;
    return {
      kubeconfigPath: i.kubeconfig,
      kc,
      full,
      server,
      shared: standalone === undefined,
      async kubectl(args, opts = {}) {
        const r = await execa(kubectlPath, ['--kubeconfig', i.kubeconfig, ...args], {
          input: opts.input,
          reject: false,
          timeout: opts.timeoutMs ?? 60_000,
        });
        return { stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), exitCode: r.exitCode ?? 1 };
      },
    };
  })();
  return clusterPromise;
}

/** The local node of the cluster (shared with the run, or this process's own). */
export async function getLocalNode(): Promise<LocalNodeHandle> {
  const i = await info();
  if (!i.nodeRoot) throw new Error('The shared cluster has no local node');
  return {
    name: i.nodeName,
    root: i.nodeRoot,
    events: (filter = {}) => readNodeEvents(i.nodeRoot, filter),
    podDir: (ns, pod, uid) => findPodDir(i.nodeRoot, ns, pod, uid),
    logPath: (ns, pod, container, uid) => {
      const d = findPodDir(i.nodeRoot, ns, pod, uid);
      return d ? path.join(d, 'logs', `${container}.log`) : undefined;
    },
    pvDir: (ns, claim) => path.join(i.nodeRoot, 'pv', ns, claim),
  };
}

let nsCounter = 0;

/**
 * Creates a namespace with a unique name (`<prefix>-<pid>-<n>-<random>`) and waits until
 * its "default" ServiceAccount exists (pods need it). Labelled atlantis-operator.dev/test=true.
 */
export async function freshNamespace(prefix = 't'): Promise<string> {
  const c = await getCluster();
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .slice(0, 30)
      .replace(/^-+|-+$/g, '') || 't';
  const name = `${clean}-${process.pid}-${++nsCounter}-${Math.random().toString(36).slice(2, 7)}`;
  await kubeRequestOk(c.kc, 'POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { 'atlantis-operator.dev/test': 'true' } },
  });
  await waitFor(
    `ServiceAccount ${name}/default`,
    async () => {
      const r = await kubeRequest(c.kc, 'GET', `/api/v1/namespaces/${name}/serviceaccounts/default`);
      return r.status === 200;
    },
    { timeoutMs: 20_000, intervalMs: 20 },
  );
  return name;
}

/** Deletes a namespace (does not wait). */
export async function deleteNamespace(name: string): Promise<void> {
  const c = await getCluster();
  await kubeRequest(c.kc, 'DELETE', `/api/v1/namespaces/${name}`);
}

/** Polls `fn` until it returns a truthy value; throws with `what` after timeoutMs. */
/**
 * Waits until a CRD is Established. Asked with GETs, not `kubectl wait`: that fails at once
 * ("accessor error") when it reads the CRD before the API server wrote any condition, as a
 * fresh cluster under load does.
 */
export async function waitForCrdEstablished(kc: KubeClientConfig, name: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `CRD ${name} to become Established`,
    async () => {
      const r = await kubeRequest<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(
        kc,
        'GET',
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
      );
      return r.status === 200 && r.body.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    },
    { timeoutMs, intervalMs: 100 },
  );
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const interval = opts.intervalMs ?? 100;
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (let i = 0; i < 1_000_000; i++) {
    try {
      const v = await fn();
      if (v) return v as T;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() >= deadline) break;
    await sleep(interval);
  }
  throw new Error(
    `Timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? ` (last error: ${lastErr instanceof Error ? lastErr.message : String(lastErr)})` : ''}`,
  );
}

/** Reads a file, '' when it does not exist. */
export function readFileOr(file: string | undefined): string {
  if (!file) return '';
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
