// Controller test helpers: the CRD applied once per cluster, an in-process controller
// watching one test namespace (so test files sharing the cluster never act on each other's
// objects), and small typed helpers around AtlantisDeployments.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';
import { MERGE_PATCH, apiPath, kubeRequest, kubeRequestOk } from '../../src/k8s/client.js';
import { type LogFields, type Logger, createLogger, nullLogger } from '../../src/log.js';
import { createControllerMetrics, type ControllerMetrics } from '../../src/controller/metrics.js';
import { AtlantisController } from '../../src/controller/reconcile/controller.js';
import { ReferencedContentReader } from '../../src/controller/reconcile/referenced-content.js';
import { podReferences, podTemplateRevision } from '../../src/controller/resources/index.js';
import { API_VERSION, type AtlantisDeployment, type AtlantisDeploymentSpecInput, KIND, PLURAL } from '../../src/controller/types.js';
import { type TestCluster, waitForCrdEstablished } from './k8s.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CRD_FILE = path.join(repoRoot, 'crds', 'atlantisdeployments.atlantis-operator.dev.yaml');

let crdApplied: Promise<void> | undefined;

/** Applies the product CRD and waits until it is Established. */
export function ensureCrd(cluster: TestCluster): Promise<void> {
  crdApplied ??= (async () => {
    const r = await cluster.kubectl(['apply', '--server-side', '--force-conflicts', '-f', CRD_FILE]);
    if (r.exitCode !== 0) throw new Error(`kubectl apply of the CRD failed: ${r.stderr}`);
    await waitForCrdEstablished(cluster.kc, 'atlantisdeployments.atlantis-operator.dev');
  })();
  return crdApplied;
}

/** One log line; `at` is Date.now() when it was written (same clock as the node's and servers' logs). */
export interface CapturedLog {
  level: string;
  msg: string;
  fields: LogFields;
  at: number;
}

/** A logger that keeps every line in memory (and prints nothing). */
export function captureLogger(lines: CapturedLog[], base: LogFields = {}): Logger {
  const mk = (fields: LogFields): Logger => {
    const at = (level: string) => (msg: string, f?: LogFields) =>
      void lines.push({ level, msg, fields: { ...fields, ...f }, at: Date.now() });
    return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), child: (f) => mk({ ...fields, ...f }) };
  };
  return mk(base);
}

export interface TestController {
  controller: AtlantisController;
  metrics: ControllerMetrics;
  logs: CapturedLog[];
  stop(): Promise<void>;
}

export async function startController(
  kc: KubeClientConfig,
  namespace: string,
  opts: { verbose?: boolean; contentIntervalMs?: number } = {},
): Promise<TestController> {
  const logs: CapturedLog[] = [];
  const logger = opts.verbose ? createLogger({ level: 'debug' }) : captureLogger(logs);
  const metrics = createControllerMetrics();
  const controller = new AtlantisController({
    kc,
    namespace,
    logger,
    metrics,
    workers: 2,
    watchSilenceTimeoutMs: 30_000,
    contentIntervalMs: opts.contentIntervalMs,
  });
  await controller.start();
  return { controller, metrics, logs, stop: () => controller.stop() };
}

/** A Secret `vcs` with a token and a webhook secret, as the AtlantisDeployment examples expect. */
export async function createVcsSecret(
  kc: KubeClientConfig,
  namespace: string,
  token = 'test-token',
  webhookSecret = 'webhook-secret-for-tests',
): Promise<void> {
  await kubeRequestOk(kc, 'POST', apiPath('v1', 'secrets', namespace), {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'vcs', namespace },
    type: 'Opaque',
    stringData: { token, 'webhook-secret': webhookSecret },
  });
}

/**
 * A Secret holding a fresh shared state key (64 hex characters), as an operator makes one for
 * spec.atlantis.lockingDB.redis.sharedStateKeySecretRef; returns that ref and the key.
 */
export async function createSharedStateKeySecret(
  kc: KubeClientConfig,
  namespace: string,
  name = 'atlantis-shared-state',
): Promise<{ ref: { name: string; key: string }; key: string }> {
  const key = randomBytes(32).toString('hex');
  await kubeRequestOk(kc, 'POST', apiPath('v1', 'secrets', namespace), {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace },
    type: 'Opaque',
    stringData: { key },
  });
  return { ref: { name, key: 'key' }, key };
}

export function atlantisDeployment(
  namespace: string,
  name: string,
  spec: Partial<AtlantisDeploymentSpecInput> & { image?: string },
): AtlantisDeployment {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace },
    spec: {
      image: 'atlantis-operator:v1',
      replicas: 1,
      terminationGracePeriodSeconds: 60,
      ...spec,
      atlantis: {
        url: 'http://atlantis.test',
        repoAllowlist: 'github.com/acme/*',
        github: {
          user: 'atlantis-bot',
          tokenSecretRef: { name: 'vcs', key: 'token' },
          webhookSecretRef: { name: 'vcs', key: 'webhook-secret' },
        },
        ...spec.atlantis,
      },
    } as AtlantisDeploymentSpecInput,
  };
}

export async function createAd(kc: KubeClientConfig, ad: AtlantisDeployment): Promise<AtlantisDeployment> {
  return kubeRequestOk<AtlantisDeployment>(kc, 'POST', apiPath(API_VERSION, PLURAL, ad.metadata.namespace), ad);
}

export async function getAd(kc: KubeClientConfig, namespace: string, name: string): Promise<AtlantisDeployment> {
  return kubeRequestOk<AtlantisDeployment>(kc, 'GET', apiPath(API_VERSION, PLURAL, namespace, name));
}

export async function patchAdSpec(kc: KubeClientConfig, namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await kubeRequestOk(kc, 'PATCH', apiPath(API_VERSION, PLURAL, namespace, name), { spec }, { contentType: MERGE_PATCH });
}

export async function listPods(kc: KubeClientConfig, namespace: string, instance: string): Promise<V1Pod[]> {
  const r = await kubeRequestOk<{ items: V1Pod[] }>(kc, 'GET', apiPath('v1', 'pods', namespace), undefined, {
    query: { labelSelector: `app.kubernetes.io/instance=${instance}` },
  });
  return r.items.sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
}

export function isReady(p: V1Pod): boolean {
  return !p.metadata?.deletionTimestamp && (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export async function events(kc: KubeClientConfig, namespace: string): Promise<Array<{ reason: string; message: string; type: string }>> {
  const r = await kubeRequest<{ items: Array<{ reason: string; message: string; type: string; involvedObject: { kind: string } }> }>(
    kc,
    'GET',
    apiPath('v1', 'events', namespace),
  );
  return (r.body.items ?? []).filter((e) => e.involvedObject.kind === KIND);
}

/**
 * The revision the controller gives `ad`'s pods: its template with the content of the
 * Secrets (metadata) and ConfigMaps they read, as they are now (reconcile/referenced-content.ts).
 */
export async function controllerRevision(kc: KubeClientConfig, ad: AtlantisDeployment): Promise<string> {
  const reader = new ReferencedContentReader(kc, nullLogger(), { intervalMs: 1 });
  const content = await reader.read(ad.metadata.namespace!, podReferences(ad), {});
  return podTemplateRevision(ad, content);
}
