// Cache-freshness expectations (as client-go's ReplicaSet controller keeps them): after the
// reconciler writes, the informer cache lags the API server for a moment. A reconcile that
// ran on that stale view would plan the same action twice (a second RolloutComplete event, a
// second delete). So each write records what the cache must show before the next decision
// for that key; until it does (or the expectation expires) the reconcile waits briefly.
// This is not memory of decisions: it only says "the cache has not caught up yet".
import type { KubeObject } from '../../k8s/informer.js';

export type Expectation =
  /** An object with this name must be in the cache. */
  | { kind: 'exists'; what: 'pod' | 'pvc'; name: string }
  /** The pod with this uid must be gone or terminating. */
  | { kind: 'deleted'; uid: string }
  /** The object with this uid must have moved past this resourceVersion. */
  | { kind: 'changed'; what: 'pod' | 'atlantisDeployment'; uid: string; fromResourceVersion: string };

export interface CacheView {
  atlantisDeployment?: KubeObject;
  pods: KubeObject[];
  pvcs: KubeObject[];
}

export function isMet(e: Expectation, view: CacheView): boolean {
  switch (e.kind) {
    case 'exists':
      return (e.what === 'pod' ? view.pods : view.pvcs).some((o) => o.metadata?.name === e.name);
    case 'deleted': {
      const p = view.pods.find((o) => o.metadata?.uid === e.uid);
      return !p || Boolean(p.metadata?.deletionTimestamp);
    }
    case 'changed': {
      const o = e.what === 'pod' ? view.pods.find((x) => x.metadata?.uid === e.uid) : view.atlantisDeployment;
      return !o || o.metadata?.uid !== e.uid || o.metadata?.resourceVersion !== e.fromResourceVersion;
    }
  }
}

export class Expectations {
  private readonly byKey = new Map<string, { items: Expectation[]; expiresAt: number }>();

  constructor(
    private readonly ttlMs = 15_000,
    private readonly now: () => number = Date.now,
  ) {}

  expect(key: string, e: Expectation): void {
    const cur = this.byKey.get(key);
    const expiresAt = this.now() + this.ttlMs;
    if (cur) {
      cur.items.push(e);
      cur.expiresAt = expiresAt;
    } else this.byKey.set(key, { items: [e], expiresAt });
  }

  /** True when the cache shows every write of this key (or they expired); clears them then. */
  satisfied(key: string, view: CacheView): boolean {
    const cur = this.byKey.get(key);
    if (!cur) return true;
    cur.items = cur.items.filter((e) => !isMet(e, view));
    if (cur.items.length === 0 || this.now() >= cur.expiresAt) {
      this.byKey.delete(key);
      return true;
    }
    return false;
  }
}
