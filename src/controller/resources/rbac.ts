// What a server pod may do with the API: read its own Pod (to see the drain annotation).
//
// Least privilege: the Role lists the pod names by `resourceNames`. RBAC honours
// resourceNames for list and watch only when the request carries the field selector
// `metadata.name=<name>`, so the server must watch its Pod that way (a plain list/watch of
// all pods is refused). The Role is re-rendered with the pods that exist or are wanted, so a
// scale-up grants the new names and a pod draining during a scale-down keeps its access.
import type { V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import type { AtlantisDeployment } from '../types.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, podName, requireName, serverAccountName } from './names.js';

export function renderServiceAccount(ad: AtlantisDeployment): V1ServiceAccount {
  const { name, namespace } = requireName(ad);
  return {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: serverAccountName(name), namespace, labels: commonLabels(name), ownerReferences: [ownerReference(ad)] },
  };
}

/**
 * `ordinals`: every ordinal that has or should have a pod (0..replicas-1 plus existing
 * higher ones). With none, the Role has no rules: an empty resourceNames list would mean
 * "all pods".
 */
export function renderRole(ad: AtlantisDeployment, ordinals: Iterable<number>): V1Role {
  const { name, namespace } = requireName(ad);
  const names = [...new Set(ordinals)].sort((a, b) => a - b).map((o) => podName(name, o));
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: serverAccountName(name), namespace, labels: commonLabels(name), ownerReferences: [ownerReference(ad)] },
    rules: names.length === 0 ? [] : [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'], resourceNames: names }],
  };
}

/** The ordinals renderRole should cover: desired ones and any existing pod's. */
export function roleOrdinals(replicas: number, existingOrdinals: Iterable<number>): number[] {
  const set = new Set<number>(existingOrdinals);
  for (let i = 0; i < replicas; i++) set.add(i);
  return [...set].sort((a, b) => a - b);
}

/** Binds the Role to the account the pods run as: ours, or podTemplate.spec.serviceAccountName. */
export function renderRoleBinding(ad: AtlantisDeployment): V1RoleBinding {
  const { name, namespace } = requireName(ad);
  const spec = withDefaults(ad.spec);
  const subject = spec.podTemplate?.spec?.serviceAccountName ?? serverAccountName(name);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: serverAccountName(name), namespace, labels: commonLabels(name), ownerReferences: [ownerReference(ad)] },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: serverAccountName(name) },
    subjects: [{ kind: 'ServiceAccount', name: subject, namespace }],
  };
}
