// Writes AtlantisDeployment status outside the reconcile that computed it: one write at a time
// per object, the newest status wins (one computed while a write is in flight replaces any
// older one still waiting). A reconcile holds its key until it returns, and on a loaded API
// server a status PATCH takes seconds; written inline, it kept the key busy when a drained
// server's answer came in, and the delete waited behind it. Until the write lands, the
// reconciler plans with the status it asked for (pendingFor), so a transition is never
// seen twice (no second RolloutComplete event) just because the write is slow.
import type { KubeClientConfig } from '../../k8s/kubeconfig.js';
import type { Logger } from '../../log.js';
import { MERGE_PATCH } from '../../k8s/client.js';
import { ResourceClient, isNotFound } from '../../k8s/resources.js';
import { API_VERSION, type AtlantisDeployment, type AtlantisDeploymentStatus, PLURAL } from '../types.js';
import { objectKey } from '../workqueue.js';

export interface StatusWriterOptions {
  kc: KubeClientConfig;
  logger: Logger;
  /** The object the API server returned after a write (fresher than the informer's copy). */
  onWritten: (key: string, ad: AtlantisDeployment) => void;
  /** A write failed: the key should be reconciled again (with backoff). */
  onFailed: (key: string, error: Error) => void;
  /** Ends the writes in flight (shutdown, lost leadership). */
  signal?: AbortSignal;
}

interface Job {
  namespace: string;
  name: string;
  uid: string;
  status: AtlantisDeploymentStatus;
}

export class StatusWriter {
  /** Waiting to be written, per key; at most one. */
  private readonly waiting = new Map<string, Job>();
  /** Being written now, per key. */
  private readonly inFlight = new Map<string, Job>();
  private readonly loops = new Set<Promise<void>>();
  private stopped = false;
  private readonly client: ResourceClient<AtlantisDeployment>;

  constructor(private readonly o: StatusWriterOptions) {
    this.client = new ResourceClient(o.kc, { apiVersion: API_VERSION, plural: PLURAL });
  }

  /** Queues the status of `ad` (null fields already removed); returns at once. */
  submit(ad: AtlantisDeployment, status: AtlantisDeploymentStatus): void {
    if (this.stopped) return;
    const key = objectKey(ad.metadata.namespace!, ad.metadata.name!);
    this.waiting.set(key, { namespace: ad.metadata.namespace!, name: ad.metadata.name!, uid: ad.metadata.uid!, status });
    if (this.inFlight.has(key)) return; // its loop takes the newest when the write in flight ends
    const loop = this.writeAll(key);
    this.loops.add(loop);
    void loop.finally(() => this.loops.delete(loop));
  }

  /** The status asked for and not yet written for this object (same uid), if any. */
  pendingFor(ad: AtlantisDeployment): AtlantisDeploymentStatus | undefined {
    const key = objectKey(ad.metadata.namespace!, ad.metadata.name!);
    const job = this.waiting.get(key) ?? this.inFlight.get(key);
    return job && job.uid === ad.metadata.uid ? job.status : undefined;
  }

  /** No more writes: drops what waits, waits for the writes in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.waiting.clear();
    await Promise.all([...this.loops]);
  }

  private async writeAll(key: string): Promise<void> {
    for (let job = this.waiting.get(key); job && !this.stopped; job = this.waiting.get(key)) {
      this.waiting.delete(key);
      this.inFlight.set(key, job);
      try {
        await this.write(key, job);
      } catch (e) {
        // A newer status waiting is written next anyway; otherwise reconcile again (unless
        // stopped: the write was aborted, and the next leader writes status itself).
        if (!this.waiting.has(key) && !this.stopped) this.o.onFailed(key, e as Error);
      } finally {
        this.inFlight.delete(key);
      }
    }
  }

  private async write(key: string, job: Job): Promise<void> {
    let written: AtlantisDeployment;
    try {
      // A whole-object merge patch: nested lists (conditions, pods) are replaced, not merged.
      written = await this.client.patch(job.namespace, job.name, { status: job.status }, MERGE_PATCH, {
        subresource: 'status',
        signal: this.o.signal,
      });
    } catch (e) {
      if (isNotFound(e)) return; // deleted: nothing to write to
      throw e;
    }
    this.o.onWritten(key, written);
    this.o.logger.debug('Status written', {
      atlantisDeployment: { namespace: job.namespace, name: job.name },
      readyReplicas: job.status.readyReplicas,
      updatedReplicas: job.status.updatedReplicas,
      drainingReplicas: job.status.drainingReplicas,
    });
  }
}
