// Reads what stands for the content of the Secrets and ConfigMaps the pods reference
// (resources/content.ts): a ConfigMap's data, a Secret's metadata only. Each object is read
// at most once per `intervalMs` (shared by every AtlantisDeployment of the namespace that
// references it), so a rollout that reconciles every 500 ms does not read them as often; a
// change is seen within the interval, and every AtlantisDeployment that references anything is
// looked at again at least that often (reconciler.ts).
//
// The controller's ServiceAccount may `get` Secrets (not list or watch them); this module is
// the only code that uses it, and it asks for PartialObjectMetadata, so the API server never
// sends a Secret's data to the controller (SECURITY.md says what the permission still allows).
import type { KubeClientConfig } from '../../k8s/kubeconfig.js';
import { PARTIAL_OBJECT_METADATA, apiPath, kubeRequest } from '../../k8s/client.js';
import type { CallOptions } from '../../k8s/resources.js';
import type { Logger } from '../../log.js';
import { type ReferencedContent, type ReferencedObjects, configMapToken, contentKey, secretToken } from '../resources/content.js';

/** How often a referenced object is read again (and the longest a change goes unseen). */
export const DEFAULT_CONTENT_INTERVAL_MS = 30_000;

interface Entry {
  token: string;
  at: number;
}

export class ReferencedContentReader {
  private readonly cache = new Map<string, Entry>();
  private readonly intervalMs: number;
  private readonly now: () => number;
  private sweptAt = 0;
  /** Objects the controller may not read (403), warned about once each. */
  private readonly forbidden = new Set<string>();

  constructor(
    private readonly kc: KubeClientConfig,
    private readonly log: Logger,
    opts: { intervalMs?: number; now?: () => number } = {},
  ) {
    this.intervalMs = opts.intervalMs ?? DEFAULT_CONTENT_INTERVAL_MS;
    this.now = opts.now ?? Date.now;
  }

  get interval(): number {
    return this.intervalMs;
  }

  /**
   * The tokens of `refs` in `namespace`. An object read within the interval is not read again.
   * A read that fails keeps the last token (so an API server hiccup never looks like a change);
   * with none yet it throws, and the reconcile is retried.
   */
  async read(namespace: string, refs: ReferencedObjects, call: CallOptions): Promise<ReferencedContent> {
    this.sweep();
    const out: ReferencedContent = {};
    const jobs: Array<Promise<void>> = [];
    const want = (kind: 'secret' | 'configmap', name: string) => {
      const key = contentKey(kind, name);
      const cacheKey = `${namespace}/${key}`;
      const hit = this.cache.get(cacheKey);
      if (hit && this.now() - hit.at < this.intervalMs) {
        out[key] = hit.token;
        return;
      }
      jobs.push(
        this.fetch(namespace, kind, name, call).then(
          (token) => {
            if (hit && hit.token !== token) this.log.info('Referenced content changed', { namespace, object: key });
            this.cache.set(cacheKey, { token, at: this.now() });
            out[key] = token;
          },
          (e: unknown) => {
            if (!hit) throw e;
            this.log.debug('Referenced object not read; its last token stands', { namespace, object: key, error: (e as Error).message });
            out[key] = hit.token;
          },
        ),
      );
    };
    for (const n of refs.secrets) want('secret', n);
    for (const n of refs.configMaps) want('configmap', n);
    await Promise.all(jobs);
    return out;
  }

  /** Drops tokens not read for a few intervals: objects no longer referenced (bounded memory). */
  private sweep(): void {
    const now = this.now();
    if (now - this.sweptAt < this.intervalMs) return;
    this.sweptAt = now;
    for (const [k, e] of this.cache) if (now - e.at > 4 * this.intervalMs) this.cache.delete(k);
  }

  private async fetch(namespace: string, kind: 'secret' | 'configmap', name: string, call: CallOptions): Promise<string> {
    const secret = kind === 'secret';
    const path = apiPath('v1', secret ? 'secrets' : 'configmaps', namespace, name);
    const r = await kubeRequest<{ resourceVersion?: string; metadata?: { resourceVersion?: string } }>(this.kc, 'GET', path, undefined, {
      ...call,
      ...(secret ? { accept: PARTIAL_OBJECT_METADATA } : {}),
    });
    if (r.status === 404) return secret ? secretToken(undefined) : configMapToken(undefined);
    if (r.status === 403) {
      // The RBAC of an older install: rolls on this object's content start once it is
      // allowed (the token then changes once), and nothing else waits for it.
      const what = `${namespace}/${kind}/${name}`;
      if (!this.forbidden.has(what))
        this.log.warn('Referenced object cannot be read: a change to it will not roll the pods until the controller may get it', {
          namespace,
          object: contentKey(kind, name),
        });
      this.forbidden.add(what);
      return 'forbidden';
    }
    this.forbidden.delete(`${namespace}/${kind}/${name}`);
    if (r.status !== 200) throw new Error(`GET ${kind} ${namespace}/${name}: HTTP ${r.status}`);
    if (secret) return secretToken(r.body.metadata);
    return configMapToken(r.body as { data?: Record<string, string>; binaryData?: Record<string, string> });
  }
}
