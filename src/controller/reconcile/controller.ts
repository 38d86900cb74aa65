// The controller: informers on AtlantisDeployments and on everything they own (selected by
// the managed-by label), a work queue keyed by namespace/name, and workers that run the
// Reconciler. Watch events only enqueue keys (level-based): what to do is always decided
// from the caches at reconcile time.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import type { KubeClientConfig } from '../../k8s/kubeconfig.js';
import { apiPath } from '../../k8s/client.js';
import { Informer, type KubeObject } from '../../k8s/informer.js';
import type { Logger } from '../../log.js';
import type { ControllerMetrics } from '../metrics.js';
import { API_VERSION, type AtlantisDeployment, KIND, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY, PLURAL } from '../types.js';
import { WorkQueue, objectKey, runWorkers, splitKey } from '../workqueue.js';
import { isDrained } from '../rollout/index.js';
import { DrainWatch } from './drain-watch.js';
import { type ClusterCache, OWNED_KINDS, type OwnedKindName, Reconciler } from './reconciler.js';

export interface ControllerOptions {
  kc: KubeClientConfig;
  /** Watch one namespace only; all namespaces when undefined. */
  namespace?: string;
  logger: Logger;
  metrics: ControllerMetrics;
  workers: number;
  /** Restart a watch that has been silent this long (default 60 s). */
  watchSilenceTimeoutMs?: number;
  /** A reconcile's API requests are aborted after this long (default RECONCILE_TIMEOUT_MS). */
  reconcileTimeoutMs?: number;
  /** How often referenced Secrets' and ConfigMaps' content is read again (default 30 s). */
  contentIntervalMs?: number;
}

/**
 * A reconcile that takes longer is stuck on the API server (a request that hangs, 429s that
 * keep coming): aborting frees its key, and the work queue retries it with backoff.
 */
export const RECONCILE_TIMEOUT_MS = 60_000;

const MANAGED = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;

export class AtlantisController {
  private readonly queue: WorkQueue;
  private readonly ads: Informer<AtlantisDeployment>;
  private readonly pods: Informer<V1Pod>;
  private readonly pvcs: Informer<V1PersistentVolumeClaim>;
  private readonly owned: Record<OwnedKindName, Informer<KubeObject>>;
  private readonly reconciler: Reconciler;
  private readonly drainWatch: DrainWatch;
  private workers?: Promise<void>;
  private synced = false;
  /** Aborted by stop(): ends every API request in flight (shutdown, lost leadership). */
  private readonly lifetime = new AbortController();

  constructor(private readonly o: ControllerOptions) {
    this.queue = new WorkQueue({
      baseDelayMs: 100,
      maxDelayMs: 60_000,
      onTake: (ms) => o.metrics.workqueueQueueDuration.observe(ms / 1000),
    });
    const informerOpts = { logger: o.logger.child({ component: 'informer' }), silenceTimeoutMs: o.watchSilenceTimeoutMs };
    const owned = { ...informerOpts, labelSelector: MANAGED };
    // Pods and PVCs by the AtlantisDeployment they belong to: its key, from the instance label.
    const instanceKey = (x: KubeObject) => {
      const i = x.metadata?.labels?.[LABEL_INSTANCE];
      return i === undefined ? undefined : objectKey(x.metadata?.namespace ?? '', i);
    };
    const byInstanceLabel = { ...owned, indexBy: instanceKey };
    this.ads = new Informer<AtlantisDeployment>(o.kc, apiPath(API_VERSION, PLURAL, o.namespace), informerOpts);
    this.pods = new Informer<V1Pod>(o.kc, apiPath('v1', 'pods', o.namespace), byInstanceLabel);
    this.pvcs = new Informer<V1PersistentVolumeClaim>(o.kc, apiPath('v1', 'persistentvolumeclaims', o.namespace), byInstanceLabel);
    this.owned = Object.fromEntries(
      Object.entries(OWNED_KINDS).map(([k, kind]) => [
        k,
        new Informer<KubeObject>(o.kc, apiPath(kind.apiVersion, kind.plural, o.namespace), owned),
      ]),
    ) as Record<OwnedKindName, Informer<KubeObject>>;

    const byInstance =
      <T extends KubeObject>(inf: Informer<T>) =>
      (namespace: string, instance: string): T[] =>
        inf.byIndex(objectKey(namespace, instance));
    const cache: ClusterCache = {
      atlantisDeployment: (ns, name) => this.ads.get(ns, name),
      pods: byInstance(this.pods),
      pvcs: byInstance(this.pvcs),
      owned: (kind, ns, name) => this.owned[kind].get(ns, name),
    };
    // A drained pod is the rollout's critical path (nothing runs on it, its replacement
    // waits): its owner goes before routine work in the queue.
    this.drainWatch = new DrainWatch({
      onChange: (key, answer) => {
        const { namespace, name } = splitKey(key);
        const drained = isDrained(answer);
        o.logger.debug('Server status changed', { atlantisDeployment: { namespace, name }, reachable: answer.ok, drained });
        this.enqueue(namespace, name, drained);
      },
      onError: (key, error) => o.logger.error('Drain watch failed', { key, error: error instanceof Error ? error.message : String(error) }),
    });
    this.reconciler = new Reconciler({
      kc: o.kc,
      cache,
      logger: o.logger,
      metrics: o.metrics,
      instance: process.env.POD_NAME ?? hostname(),
      drainWatch: this.drainWatch,
      signal: this.lifetime.signal,
      contentIntervalMs: o.contentIntervalMs,
      onStatusWriteFailed: (key, error) => {
        const retryInMs = this.queue.addRateLimited(key);
        o.logger.error('Status write failed', { atlantisDeployment: splitKey(key), error: error.message, retryInMs });
      },
    });

    this.ads.onEvent((_t, ad) => this.enqueue(ad.metadata?.namespace, ad.metadata?.name));
    const enqueueOwner = (_t: string, obj: KubeObject) => this.enqueue(obj.metadata?.namespace, ownerName(obj));
    this.pods.onEvent(enqueueOwner);
    this.pvcs.onEvent(enqueueOwner);
    for (const inf of Object.values(this.owned)) inf.onEvent(enqueueOwner);
  }

  /** Starts the informers, waits until they have listed, then starts the workers. */
  async start(): Promise<void> {
    await Promise.all([this.ads, this.pods, this.pvcs, ...Object.values(this.owned)].map((i) => i.start()));
    this.synced = true;
    this.o.logger.info('Controller caches synced', { atlantisDeployments: this.ads.list().length, pods: this.pods.list().length });
    this.workers = runWorkers(
      this.queue,
      this.o.workers,
      (key) => this.reconcileKey(key),
      (key, err, retryInMs) => {
        const { namespace, name } = splitKey(key);
        this.o.logger.error('Reconcile failed', { atlantisDeployment: { namespace, name }, error: (err as Error).message, retryInMs });
      },
      urgentWorkers(this.o.workers),
    );
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /**
   * Stops taking keys, aborts the API requests in flight (a reconcile ends at its next
   * request: the next leader starts from what the cluster shows), waits for the workers,
   * stops watches.
   */
  async stop(): Promise<void> {
    this.queue.shutDown();
    this.lifetime.abort(new Error('controller stopping'));
    await this.workers;
    await this.reconciler.stop();
    this.drainWatch.stopAll();
    for (const i of [this.ads, this.pods, this.pvcs, ...Object.values(this.owned)]) i.stop();
  }

  private enqueue(namespace: string | undefined, name: string | undefined, urgent = false): void {
    if (!namespace || !name) return;
    this.queue.add(objectKey(namespace, name), { urgent });
    this.o.metrics.workqueueDepth.set(this.queue.len());
  }

  private async reconcileKey(key: string): Promise<{ requeueAfterMs: number | null }> {
    const { namespace, name } = splitKey(key);
    const reconcileID = randomUUID();
    const started = process.hrtime.bigint();
    this.o.metrics.workqueueDepth.set(this.queue.len());
    // At debug, with the reconcile's own lines between them: where a slow key's time went.
    const fields = { atlantisDeployment: { namespace, name }, reconcileID };
    this.o.logger.debug('Reconcile started', fields);
    // Its own controller, not AbortSignal.any: listeners on the long-lived lifetime signal are
    // removed when the reconcile ends, and the reason says which of the two fired.
    const abort = new AbortController();
    const timeoutMs = this.o.reconcileTimeoutMs ?? RECONCILE_TIMEOUT_MS;
    const onStop = () => abort.abort(this.lifetime.signal.reason);
    this.lifetime.signal.addEventListener('abort', onStop, { once: true });
    const timer = setTimeout(() => abort.abort(new Error(`reconcile timed out after ${timeoutMs / 1000} s`)), timeoutMs);
    try {
      if (this.lifetime.signal.aborted) onStop();
      const r = await this.reconciler.reconcile(namespace, name, reconcileID, abort.signal);
      this.o.metrics.statusWatches.set(this.drainWatch.size());
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.o.metrics.observeReconcile(r.requeueAfterMs !== null ? 'requeue' : 'success', seconds);
      this.o.logger.debug('Reconcile finished', { ...fields, seconds, requeueAfterMs: r.requeueAfterMs });
      return { requeueAfterMs: r.requeueAfterMs };
    } catch (e) {
      this.o.metrics.observeReconcile('error', Number(process.hrtime.bigint() - started) / 1e9);
      if (abort.signal.aborted) throw new Error(`Reconcile aborted: ${(abort.signal.reason as Error).message}`, { cause: e });
      throw e;
    } finally {
      clearTimeout(timer);
      this.lifetime.signal.removeEventListener('abort', onStop);
    }
  }
}

/**
 * Workers kept for urgent keys (a drained pod's owner), on top of --max-concurrent-reconciles:
 * in a rollout of many AtlantisDeployments every worker can be waiting on a slow API server
 * (a drain PATCH, a pod create), and a drained pod would wait for one of them to finish.
 * As many as the others: when every pod of a big rollout drains at once, fewer would leave
 * the last ones waiting in the queue while each delete is slow on a loaded API server.
 * Urgent keys are few otherwise: at most one per pod that has just drained.
 */
export function urgentWorkers(workers: number): number {
  return Math.max(2, workers);
}

/** The AtlantisDeployment an owned object belongs to: its controller ownerReference, else the instance label. */
function ownerName(obj: KubeObject): string | undefined {
  const ref = obj.metadata?.ownerReferences?.find((r) => r.kind === KIND && r.apiVersion === API_VERSION && r.controller);
  return ref?.name ?? obj.metadata?.labels?.[LABEL_INSTANCE];
}
