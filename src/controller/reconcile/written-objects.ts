// The objects the reconciler's own writes returned (client-go's MutationCache).
import type { KubeObject } from '../../k8s/informer.js';

/**
 * The objects our own PATCHes returned, newer than the informer's copies until the watch
 * delivers them (client-go's MutationCache). Without it every drain patch and status write
 * would make the next reconcile of the key wait for the watch, seconds on a busy API server.
 * Only a fresher view of the cluster: nothing here says what was done or decided.
 */
export class WrittenObjects {
  private readonly byUid = new Map<string, { key: string; obj: KubeObject }>();

  record(key: string, obj: KubeObject | undefined): void {
    const uid = obj?.metadata?.uid;
    if (uid && obj.metadata?.resourceVersion) this.byUid.set(uid, { key, obj });
  }

  /** The written copy when it is newer than the cached one; drops it once the cache caught up. */
  fresher<T extends KubeObject>(cached: T): T {
    const uid = cached.metadata?.uid;
    const w = uid ? this.byUid.get(uid) : undefined;
    if (!w) return cached;
    // resourceVersions are opaque, but etcd's are increasing integers (client-go compares them the same way).
    const mine = Number(w.obj.metadata?.resourceVersion);
    const theirs = Number(cached.metadata?.resourceVersion);
    if (Number.isFinite(mine) && Number.isFinite(theirs) && mine > theirs) return w.obj as T;
    this.byUid.delete(uid!);
    return cached;
  }

  /** Forgets the key's entries whose object is gone (not among `live` uids). */
  forget(key: string, live: Set<string>): void {
    for (const [uid, w] of this.byUid) if (w.key === key && !live.has(uid)) this.byUid.delete(uid);
  }

  size(): number {
    return this.byUid.size;
  }
}
