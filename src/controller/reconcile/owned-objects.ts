// The objects an AtlantisDeployment owns besides its pods and PVCs (Service, ServiceAccount,
// Role, RoleBinding, PodDisruptionBudget, per pod and per instance), kept as rendered by
// server-side apply: fields we set are ours (fieldManager, force), so an edit by anyone else
// is reverted, and fields the API server fills in (a Service's clusterIP) are left alone.
//
// An apply is sent only when the cached object lacks or differs from a field we set (pure:
// ownedDrift), so a steady state costs no request; an owned object's watch event enqueues
// its AtlantisDeployment, so a change by someone else is seen at once.
import type { KubeObject } from '../../k8s/informer.js';
import { type CallOptions, type ResourceClient, isConflict, isNotFound } from '../../k8s/resources.js';
import { hashRevision } from '../resources/revision.js';

/** Our field manager for server-side apply (owner of every field we set). */
export const FIELD_MANAGER = 'atlantis-operator';

/**
 * True when `current` (from the informer cache) does not carry every field `desired` sets, or
 * still has a field our last apply set that `desired` no longer does (a Service annotation
 * taken out of the spec): the next apply, without it, removes it.
 */
export function ownedDrift(desired: KubeObject, current: KubeObject | undefined): boolean {
  if (!current) return true;
  const { apiVersion: _a, kind: _k, metadata, status: _s, ...content } = desired as KubeObject & Record<string, unknown>;
  const { apiVersion: _ca, kind: _ck, metadata: cm, status: _cs, ...currentContent } = current as KubeObject & Record<string, unknown>;
  const meta = { labels: metadata?.labels, annotations: metadata?.annotations, ownerReferences: metadata?.ownerReferences };
  return !covers(cm, meta) || !covers(currentContent, content) || ownsUnwanted(desired, current);
}

/** Whether our manager's apply owns a field of `current` (managedFields) that `desired` does not set. */
export function ownsUnwanted(desired: KubeObject, current: KubeObject): boolean {
  const entry = current.metadata?.managedFields?.find((m) => m.manager === FIELD_MANAGER && m.operation === 'Apply');
  const fields = entry?.fieldsV1 as Record<string, unknown> | undefined;
  return fields !== undefined && unwanted(fields, desired);
}

/** Walks a fieldsV1 set (`f:<name>`, `k:<key JSON>`, `v:<value JSON>`) against what we want now. */
function unwanted(fields: Record<string, unknown>, want: unknown): boolean {
  for (const [k, sub] of Object.entries(fields)) {
    if (k === '.') continue;
    const inner = (sub ?? {}) as Record<string, unknown>;
    if (k.startsWith('f:')) {
      const v = isObject(want) ? want[k.slice(2)] : undefined;
      if (v === undefined || v === null) return true;
      if (Object.keys(inner).length > 0 && unwanted(inner, v)) return true;
    } else if (k.startsWith('k:')) {
      const key = parseJson(k.slice(2));
      const item =
        Array.isArray(want) && isObject(key)
          ? want.find((w) => isObject(w) && Object.entries(key).every(([kk, kv]) => w[kk] === kv))
          : undefined;
      if (item === undefined) return true;
      if (unwanted(inner, item)) return true;
    } else if (k.startsWith('v:')) {
      const value = parseJson(k.slice(2));
      if (!Array.isArray(want) || !want.some((w) => JSON.stringify(w) === JSON.stringify(value))) return true;
    }
  }
  return false;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
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
 * The resourceVersion each apply returned, per AtlantisDeployment and object uid, with a
 * digest of what was applied. A cached copy no newer than it is our own result (or older, the
 * watch lagging): applying the same again changes nothing, so it is skipped even if it shows
 * drift, e.g. a Service port someone added, which server-side apply leaves to its manager.
 * A different desired object (the spec changed) is always applied.
 */
export class AppliedVersions {
  private readonly byKey = new Map<string, Map<string, { rv: string; digest: string | undefined }>>();

  record(key: string, obj: KubeObject, digest?: string): void {
    const { uid, resourceVersion } = obj.metadata ?? {};
    if (!uid || !resourceVersion) return;
    let m = this.byKey.get(key);
    if (!m) {
      m = new Map();
      this.byKey.set(key, m);
    }
    m.set(uid, { rv: resourceVersion, digest });
  }

  /** True when `current` is not newer than what our last apply to it returned, and that apply was `digest`'s. */
  ours(key: string, current: KubeObject, digest?: string): boolean {
    const uid = current.metadata?.uid;
    const last = uid ? this.byKey.get(key)?.get(uid) : undefined;
    if (!last || last.digest !== digest) return false;
    const mine = Number(last.rv);
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
  const digest = hashRevision(desired);
  if (current && (applied.ours(key, current, digest) || !ownedDrift(desired, current))) return 'none';
  applied.record(key, await client.apply(desired, { ...o, fieldManager: FIELD_MANAGER, force: true }), digest);
  return current ? 'applied' : 'created';
}

/**
 * Deletes `cached` if this AtlantisDeployment owns it (its controller ownerReference), with a
 * uid precondition so an object someone made in its place since stays. For objects the spec
 * no longer asks for (an Ingress). Returns the name deleted, or undefined.
 */
export async function deleteOwned(
  client: ResourceClient<KubeObject>,
  owner: KubeObject,
  cached: KubeObject | undefined,
  o: CallOptions = {},
): Promise<string | undefined> {
  const md = cached?.metadata;
  if (!md?.uid || !md.name || md.deletionTimestamp) return undefined;
  if (!md.ownerReferences?.some((r) => r.uid === owner.metadata?.uid && r.controller)) return undefined;
  try {
    await client.delete(md.namespace, md.name, { preconditions: { uid: md.uid } }, o);
  } catch (e) {
    if (isNotFound(e) || isConflict(e)) return undefined;
    throw e;
  }
  return md.name;
}
