// What a server pod may do with the API: read its own Pod (to see the drain annotation).
//
// Least privilege, per pod: each ordinal runs as its own ServiceAccount `<name>-atlantis-<n>`,
// bound to a Role that names only its own Pod (`resourceNames: [<name>-<n>]`). Pods of one
// instance share nothing, so a pod (or terraform run in it, which can read the pod's token)
// cannot read a sibling's spec. RBAC honours resourceNames for list and watch only when the
// request carries the field selector `metadata.name=<name>`, so the server watches its Pod
// that way (a plain list/watch of all pods is refused).
//
// Pods named by revision (`<name>-<ordinal>-<revision>`, a surge) change names with each
// rollout; an ordinal's Role lists the names of its pods that exist (the old and the new one
// during a surge) and of the pod the rollout creates next, so the new pod can read itself
// from its first request and the old one until it is gone. The two pods of one ordinal
// share its account, so during a surge each can read the other; no other ordinal's pod.
//
// The instance-wide account `<name>-atlantis` remains for two cases: pods that run as a
// podTemplate.spec.serviceAccountName (one account for every pod, so its Role covers every
// ordinal), and pods created before accounts were per pod (covered until they are replaced).
import type { V1Pod, V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import type { AtlantisDeployment } from '../types.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, podAccountName, podName, requireName, serverAccountName } from './names.js';

const meta = (ad: AtlantisDeployment, objectName: string) => {
  const { name, namespace } = requireName(ad);
  return { name: objectName, namespace, labels: commonLabels(name), ownerReferences: [ownerReference(ad)] };
};

const ownPodRules = (names: string[]): V1Role['rules'] =>
  // No names, no rule: an empty resourceNames list would mean "all pods".
  names.length === 0 ? [] : [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'], resourceNames: names }];

/**
 * spec.serviceAccount's labels (under ours: the controller finds what it owns by them) and
 * annotations (IRSA, Workload Identity) on every account made for the pods.
 */
const accountMeta = (ad: AtlantisDeployment, objectName: string) => {
  const m = meta(ad, objectName);
  const sa = withDefaults(ad.spec).serviceAccount;
  const annotations = sa?.annotations && Object.keys(sa.annotations).length > 0 ? { annotations: sa.annotations } : {};
  return { ...m, labels: { ...(sa?.labels ?? {}), ...m.labels }, ...annotations };
};

export function renderServiceAccount(ad: AtlantisDeployment): V1ServiceAccount {
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: accountMeta(ad, serverAccountName(requireName(ad).name)) };
}

/** The instance-wide Role: `ordinals` from serverAccess, or the pods' names (accessPodNames) when given. */
export function renderRole(ad: AtlantisDeployment, ordinals: Iterable<number>, podNames?: readonly string[]): V1Role {
  const { name } = requireName(ad);
  const names = podNames ? sortedNames(podNames) : [...new Set(ordinals)].sort((a, b) => a - b).map((o) => podName(name, o));
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: meta(ad, serverAccountName(name)),
    rules: ownPodRules(names),
  };
}

/** The ordinals that have or should have a pod: desired ones and any existing pod's. */
export function roleOrdinals(replicas: number, existingOrdinals: Iterable<number>): number[] {
  const set = new Set<number>(existingOrdinals);
  for (let i = 0; i < replicas; i++) set.add(i);
  return [...set].sort((a, b) => a - b);
}

/** Binds the instance-wide Role to the account such pods run as: ours, or podTemplate.spec.serviceAccountName. */
export function renderRoleBinding(ad: AtlantisDeployment): V1RoleBinding {
  const { name, namespace } = requireName(ad);
  const subject = customAccount(ad) ?? serverAccountName(name);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: meta(ad, serverAccountName(name)),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: serverAccountName(name) },
    subjects: [{ kind: 'ServiceAccount', name: subject, namespace }],
  };
}

export function renderPodServiceAccount(ad: AtlantisDeployment, ordinal: number): V1ServiceAccount {
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: accountMeta(ad, podAccountName(requireName(ad).name, ordinal)) };
}

/** The ordinal's Role: its own Pod(s), by name (accessPodNames), nothing else. */
export function renderPodRole(ad: AtlantisDeployment, ordinal: number, podNames?: readonly string[]): V1Role {
  const { name } = requireName(ad);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: meta(ad, podAccountName(name, ordinal)),
    rules: ownPodRules(podNames ? sortedNames(podNames) : [podName(name, ordinal)]),
  };
}

const sortedNames = (names: readonly string[]): string[] => [...new Set(names)].sort();

export function renderPodRoleBinding(ad: AtlantisDeployment, ordinal: number): V1RoleBinding {
  const { name, namespace } = requireName(ad);
  const account = podAccountName(name, ordinal);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: meta(ad, account),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: account },
    subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
  };
}

/** podTemplate.spec.serviceAccountName, when the user set one. */
export function customAccount(ad: AtlantisDeployment): string | undefined {
  return withDefaults(ad.spec).podTemplate?.spec?.serviceAccountName;
}

export interface ServerAccess {
  /** Pods covered by the instance-wide Role. */
  shared: number[];
  /** Ordinals that get their own ServiceAccount, Role and RoleBinding. */
  perPod: number[];
}

/**
 * Who gets which Role. With a custom account every pod shares it, so the instance-wide Role
 * covers every ordinal. Otherwise every ordinal gets its own account; the instance-wide Role
 * covers only pods still running as `<name>-atlantis` (made before accounts were per pod),
 * so they keep seeing their drain annotation until they are replaced.
 */
export function serverAccess(
  ad: AtlantisDeployment,
  replicas: number,
  existing: ReadonlyArray<{ ordinal: number; pod: V1Pod }>,
): ServerAccess {
  const all = roleOrdinals(
    replicas,
    existing.map((e) => e.ordinal),
  );
  if (customAccount(ad) !== undefined) return { shared: all, perPod: [] };
  const legacy = serverAccountName(requireName(ad).name);
  return {
    shared: existing
      .filter((e) => e.pod.spec?.serviceAccountName === legacy)
      .map((e) => e.ordinal)
      .sort((a, b) => a - b),
    perPod: all,
  };
}

export interface AccessPodNames {
  /** The pods the instance-wide Role names. */
  shared: string[];
  /** Per ordinal of `perPod`: the pods its own Role names. */
  perPod: Map<number, string[]>;
}

/**
 * Pod names for the Roles of `access`: an ordinal's pods that exist (old and new, terminating
 * ones too: they watch their Pod until they exit) and `next(ordinal)`, the pod the rollout
 * creates for it at the update revision. The instance-wide Role of pods made before accounts
 * were per pod names only those pods.
 */
export function accessPodNames(
  ad: AtlantisDeployment,
  access: ServerAccess,
  existing: ReadonlyArray<{ ordinal: number; pod: V1Pod }>,
  next: (ordinal: number) => string,
): AccessPodNames {
  const of = (ordinals: Iterable<number>): string[] => {
    const want = new Set(ordinals);
    const names = existing.filter((e) => want.has(e.ordinal)).flatMap((e) => (e.pod.metadata?.name ? [e.pod.metadata.name] : []));
    return sortedNames([...names, ...[...want].map(next)]);
  };
  const legacy = serverAccountName(requireName(ad).name);
  const shared =
    customAccount(ad) !== undefined
      ? of(access.shared)
      : sortedNames(existing.filter((e) => e.pod.spec?.serviceAccountName === legacy).flatMap((e) => e.pod.metadata?.name ?? []));
  return { shared, perPod: new Map(access.perPod.map((i) => [i, of([i])])) };
}
