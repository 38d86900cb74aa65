// Create-or-update for the objects an AtlantisDeployment owns besides its pods and PVCs
// (Service, ServiceAccount, Role, RoleBinding, PodDisruptionBudget). The desired object's
// hash is stored in an annotation; an object whose hash differs is patched, one that is
// missing is created. Decisions (what to send) are pure; `applyOwned` does the I/O.
import type { KubeClientConfig } from '../../k8s/kubeconfig.js';
import { KubeApiError, MERGE_PATCH, apiPath, kubeRequest } from '../../k8s/client.js';
import type { KubeObject } from '../../k8s/informer.js';
import { hashRevision } from '../resources/revision.js';
import { GROUP } from '../types.js';

export const ANNOTATION_DESIRED_HASH = `${GROUP}/desired-hash`;

export interface OwnedKind { apiVersion: string; plural: string }

export type OwnedChange =
  | { type: 'create'; body: KubeObject }
  | { type: 'patch'; body: Record<string, unknown> }
  | { type: 'none' };

/** What to do to make `current` (from the informer cache) match `desired`. */
export function ownedChange(desired: KubeObject, current: KubeObject | undefined): OwnedChange {
  const { apiVersion: _a, kind: _k, metadata, ...content } = desired as KubeObject & Record<string, unknown>;
  const hash = hashRevision(desired);
  const annotations = { ...(metadata?.annotations ?? {}), [ANNOTATION_DESIRED_HASH]: hash };
  if (!current) return { type: 'create', body: { ...desired, metadata: { ...metadata, annotations } } };
  if (current.metadata?.annotations?.[ANNOTATION_DESIRED_HASH] === hash) return { type: 'none' };
  // Merge patch: replaces the fields we own (arrays whole), keeps what the API server
  // filled in (a Service's clusterIP, for one).
  return { type: 'patch', body: { metadata: { labels: metadata?.labels ?? {}, annotations, ownerReferences: metadata?.ownerReferences }, ...content } };
}

export async function applyOwned(kc: KubeClientConfig, kind: OwnedKind, desired: KubeObject, current: KubeObject | undefined): Promise<OwnedChange['type']> {
  const ns = desired.metadata?.namespace;
  const name = desired.metadata?.name ?? '';
  const change = ownedChange(desired, current);
  if (change.type === 'none') return 'none';
  const path = change.type === 'create' ? apiPath(kind.apiVersion, kind.plural, ns) : apiPath(kind.apiVersion, kind.plural, ns, name);
  const res = await kubeRequest(kc, change.type === 'create' ? 'POST' : 'PATCH', path, change.body, { contentType: change.type === 'patch' ? MERGE_PATCH : undefined });
  // 409 on create: our cache is behind; the next reconcile sees the object and patches it.
  if (res.status === 409 && change.type === 'create') return 'none';
  if (res.status < 200 || res.status > 299) throw new KubeApiError(change.type === 'create' ? 'POST' : 'PATCH', path, res.status, res.body);
  return change.type;
}
