// The objects an AtlantisDeployment owns besides its pods and PVCs (Service, ServiceAccount,
// Role, RoleBinding, PodDisruptionBudget, per pod and per instance), kept as rendered by
// server-side apply: fields we set are ours (fieldManager, force), so an edit by anyone else
// is reverted, and fields the API server fills in (a Service's clusterIP) are left alone.
//
// An apply is sent only when the cached object lacks or differs from a field we set (pure:
// ownedDrift), so a steady state costs no request; an owned object's watch event enqueues
// its AtlantisDeployment, so a change by someone else is seen at once.
import type { KubeObject } from '../../k8s/informer.js';
import type { CallOptions, ResourceClient } from '../../k8s/resources.js';

/** Our field manager for server-side apply (owner of every field we set). */
export const FIELD_MANAGER = 'atlantis-operator';

/** True when `current` (from the informer cache) does not carry every field `desired` sets. */
export function ownedDrift(desired: KubeObject, current: KubeObject | undefined): boolean {
  if (!current) return true;
  const { apiVersion: _a, kind: _k, metadata, status: _s, ...content } = desired as KubeObject & Record<string, unknown>;
  const { apiVersion: _ca, kind: _ck, metadata: cm, status: _cs, ...currentContent } = current as KubeObject & Record<string, unknown>;
  const meta = { labels: metadata?.labels, annotations: metadata?.annotations, ownerReferences: metadata?.ownerReferences };
  return !covers(cm, meta) || !covers(currentContent, content);
}

/**
 * Whether `actual` has every field of `wanted` with the same value. Maps may hold more keys
 * (the API server's defaults, other controllers' labels); a field we leave unset (undefined,
 * null, '', {}) is not ours to check. Lists must match in length (an added Role rule is
 * drift), and an empty list stands for an absent one: the API server drops empty lists (a
 * Role without rules comes back without `rules`).
 */
export function covers(actual: unknown, wanted: unknown): boolean {
  if (wanted === undefined || wanted === null || wanted === '') return true;
  if (Array.isArray(wanted)) {
    if (wanted.length === 0) return actual === undefined || actual === null || (Array.isArray(actual) && actual.length === 0);
    return Array.isArray(actual) && actual.length === wanted.length && wanted.every((w, i) => covers(actual[i], w));
  }
  if (typeof wanted === 'object') {
    const entries = Object.entries(wanted as Record<string, unknown>);
    if (entries.length === 0) return true;
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return false;
    const a = actual as Record<string, unknown>;
    return entries.every(([k, w]) => covers(a[k], w));
  }
  return actual === wanted;
}

/**
 * The resourceVersion each apply returned, per AtlantisDeployment and object uid. A cached
 * copy no newer than it is our own result (or older, the watch lagging): applying again
 * changes nothing, so it is skipped even if it shows drift, e.g. a Service port someone
 * added, which server-side apply leaves to its manager.
 */
export class AppliedVersions {
  private readonly byKey = new Map<string, Map<string, string>>();

  record(key: string, obj: KubeObject): void {
    const { uid, resourceVersion } = obj.metadata ?? {};
    if (!uid || !resourceVersion) return;
    let m = this.byKey.get(key);
    if (!m) {
      m = new Map();
      this.byKey.set(key, m);
    }
    m.set(uid, resourceVersion);
  }

  /** True when `current` is not newer than what our last apply to it returned. */
  ours(key: string, current: KubeObject): boolean {
    const uid = current.metadata?.uid;
    const mine = Number(uid ? this.byKey.get(key)?.get(uid) : undefined);
    const theirs = Number(current.metadata?.resourceVersion);
    // etcd resourceVersions are increasing integers (WrittenObjects compares them the same way).
    return Number.isFinite(mine) && Number.isFinite(theirs) && theirs <= mine;
  }

  forget(key: string): void {
    this.byKey.delete(key);
  }
}

/**
 * Applies `desired` unless the cached object already has it (or is our own last apply).
 * Returns 'created' / 'applied' when a request was sent, 'none' otherwise.
 */
export async function applyOwned(
  client: ResourceClient<KubeObject>,
  key: string,
  applied: AppliedVersions,
  desired: KubeObject,
  current: KubeObject | undefined,
  o: CallOptions = {},
): Promise<'created' | 'applied' | 'none'> {
  if (current && (applied.ours(key, current) || !ownedDrift(desired, current))) return 'none';
  applied.record(key, await client.apply(desired, { ...o, fieldManager: FIELD_MANAGER, force: true }));
  return current ? 'applied' : 'created';
}
