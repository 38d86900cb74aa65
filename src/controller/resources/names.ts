// Names and labels of everything an AtlantisDeployment owns, in one place so the renderers,
// the planner and the informer-side code agree.
import type { V1OwnerReference } from '@kubernetes/client-node';
import {
  API_VERSION,
  APP_NAME,
  KIND,
  LABEL_INSTANCE,
  LABEL_MANAGED_BY,
  LABEL_NAME,
  LABEL_ORDINAL,
  LABEL_REVISION,
  MANAGED_BY,
  type AtlantisDeployment,
} from '../types.js';

export const podName = (name: string, ordinal: number): string => `${name}-${ordinal}`;
/**
 * `ordinal`: `<name>-<ordinal>`, one pod per ordinal at a time (the embedded store: the
 * ordinal's PVC holds its state, so its next pod waits for the last to be gone).
 * `revision`: `<name>-<ordinal>-<revision>` (pods without a PVC, their state in Redis), so
 * the ordinal's pod of a new revision can run beside the old one during a surge.
 */
export type PodNaming = 'ordinal' | 'revision';
export const podNaming = (dataClaims: boolean): PodNaming => (dataClaims ? 'ordinal' : 'revision');
/** The name of the ordinal's pod at `revision`: what the rollout creates for that ordinal next. */
export const podNameFor = (name: string, ordinal: number, revision: string, naming: PodNaming): string =>
  naming === 'ordinal' ? podName(name, ordinal) : `${name}-${ordinal}-${revision}`;
export const pvcName = (name: string, ordinal: number): string => `${name}-data-${ordinal}`;
export const serviceName = (name: string): string => name;
/**
 * The instance-wide ServiceAccount, Role and RoleBinding: for pods that run as a
 * podTemplate.spec.serviceAccountName, and for pods created before accounts were per pod.
 */
export const serverAccountName = (name: string): string => `${name}-atlantis`;
/** One ServiceAccount, Role and RoleBinding per ordinal, so a pod can read its own Pod and no sibling. */
export const podAccountName = (name: string, ordinal: number): string => `${name}-atlantis-${ordinal}`;
export const pdbName = (name: string): string => name;

/** Labels that select every pod of one AtlantisDeployment (Service, PDB, scale selector). */
export function selectorLabels(name: string): Record<string, string> {
  return { [LABEL_NAME]: APP_NAME, [LABEL_INSTANCE]: name };
}

/** The selector as a string, for `status.selector` (the scale subresource wants a string). */
export function selectorString(name: string): string {
  return Object.entries(selectorLabels(name))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

export function commonLabels(name: string): Record<string, string> {
  return { ...selectorLabels(name), [LABEL_MANAGED_BY]: MANAGED_BY };
}

export function podLabels(name: string, ordinal: number, revision: string): Record<string, string> {
  return { ...commonLabels(name), [LABEL_ORDINAL]: String(ordinal), [LABEL_REVISION]: revision };
}

/** Parses the ordinal label; null for anything that is not a canonical non-negative integer. */
export function parseOrdinal(value: string | undefined): number | null {
  if (value === undefined || !/^(0|[1-9][0-9]{0,8})$/.test(value)) return null;
  return Number(value);
}

/** controller: true + blockOwnerDeletion: true, so the garbage collector removes owned objects with the CR. */
export function ownerReference(ad: AtlantisDeployment): V1OwnerReference {
  const { name, uid } = ad.metadata;
  if (!name || !uid) throw new Error('AtlantisDeployment needs metadata.name and metadata.uid to own objects');
  return { apiVersion: API_VERSION, kind: KIND, name, uid, controller: true, blockOwnerDeletion: true };
}

export function requireName(ad: AtlantisDeployment): { name: string; namespace: string } {
  const { name, namespace } = ad.metadata;
  if (!name || !namespace) throw new Error('AtlantisDeployment needs metadata.name and metadata.namespace');
  return { name, namespace };
}
