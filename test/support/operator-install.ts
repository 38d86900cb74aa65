// The kustomize base (manifests/) installed for real on the local cluster, moved into a
// namespace of its own so test files sharing the cluster never meet: the namespace (with the
// manifests' Pod Security labels), the controller ServiceAccount, a ClusterRole and
// ClusterRoleBinding renamed per install (cluster-scoped), the leader-election Role and
// RoleBinding, the Deployment, its Service and PDB. The CRD is applied by ensureCrd().
//
// There is no Deployment controller on the local cluster, so the controller's pods are made
// by the test from the Deployment's own pod template (controllerPod()): the local node runs
// them as processes with a token of the template's ServiceAccount, so the controller has
// exactly the RBAC the manifests grant, and Pod Security admission judges the real template.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments, stringify } from 'yaml';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiPath, kubeRequest, kubeRequestOk } from '../../src/k8s/client.js';
import { ensureCrd } from './controller.js';
import type { TestCluster } from './k8s.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export type KObj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: unknown;
};

export interface OperatorInstall {
  /** the controller's namespace (the manifests' atlantis-operator, renamed) */
  namespace: string;
  serviceAccount: string;
  /** system:serviceaccount:<namespace>:<serviceAccount> */
  user: string;
  clusterRole: string;
  /** the objects as applied */
  objects: KObj[];
  deployment: V1Deployment;
  /** deletes the cluster-scoped objects and the namespace (its pods get SIGTERM from the node) */
  uninstall(): Promise<void>;
}

/** `kubectl kustomize <dir>` as objects. */
export async function renderKustomization(cluster: TestCluster, dir: string): Promise<KObj[]> {
  const r = await cluster.kubectl(['kustomize', path.join(repoRoot, dir)]);
  if (r.exitCode !== 0) throw new Error(`kubectl kustomize ${dir}: ${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as KObj)
    .filter(Boolean);
}

/**
 * Applies manifests/ into a new namespace `<prefix>-<pid>-<random>` (labels of
 * manifests/namespace.yaml kept, plus `pod-security.kubernetes.io/enforce-version=latest`).
 */
export async function installOperator(cluster: TestCluster, prefix: string): Promise<OperatorInstall> {
  await ensureCrd(cluster);
  const ns = `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 7)}`;
  const clusterRole = `atlantis-operator-${ns}`;
  const objects = (await renderKustomization(cluster, 'manifests'))
    .filter((o) => o.kind !== 'CustomResourceDefinition')
    .map((o) => {
      const c = structuredClone(o);
      if (c.kind === 'Namespace') {
        c.metadata.name = ns;
        c.metadata.labels = {
          ...c.metadata.labels,
          'pod-security.kubernetes.io/enforce-version': 'latest',
          'atlantis-operator.dev/test': 'true',
        };
      }
      if (c.metadata.namespace) c.metadata.namespace = ns;
      if (c.kind === 'ClusterRole' || c.kind === 'ClusterRoleBinding') c.metadata.name = clusterRole;
      if (c.kind === 'ClusterRoleBinding') (c.roleRef as { name: string }).name = clusterRole;
      for (const s of (c.subjects as Array<{ namespace?: string }> | undefined) ?? []) if (s.namespace) s.namespace = ns;
      return c;
    });
  const kinds = objects.map((o) => o.kind).sort();
  const want = [
    'ClusterRole',
    'ClusterRoleBinding',
    'Deployment',
    'Namespace',
    'PodDisruptionBudget',
    'Role',
    'RoleBinding',
    'Service',
    'ServiceAccount',
  ];
  if (kinds.join() !== want.join()) throw new Error(`manifests/ renders ${kinds.join(', ')}; expected ${want.join(', ')}`);
  // The Namespace first, so the namespaced objects have somewhere to go.
  const ordered = [...objects.filter((o) => o.kind === 'Namespace'), ...objects.filter((o) => o.kind !== 'Namespace')];
  const r = await cluster.kubectl(['apply', '-f', '-'], { input: ordered.map((o) => stringify(o)).join('---\n') });
  if (r.exitCode !== 0) throw new Error(`kubectl apply of manifests/ (moved to ${ns}): ${r.stderr}`);
  const deployment = objects.find((o) => o.kind === 'Deployment') as unknown as V1Deployment;
  const serviceAccount = deployment.spec!.template.spec!.serviceAccountName!;
  return {
    namespace: ns,
    serviceAccount,
    user: `system:serviceaccount:${ns}:${serviceAccount}`,
    clusterRole,
    objects,
    deployment,
    async uninstall() {
      await kubeRequest(cluster.kc, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${clusterRole}`);
      await kubeRequest(cluster.kc, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${clusterRole}`);
      await kubeRequest(cluster.kc, 'DELETE', `/api/v1/namespaces/${ns}`);
    },
  };
}

/**
 * A Pod made from the controller Deployment's template, as its ReplicaSet would make it:
 * same labels and spec. Two changes, both forced by the local node running every pod in the
 * host's network namespace: `--metrics-bind-address=$(POD_IP):8080` (the default 0.0.0.0:8080
 * would collide between replicas, and with anything else on the machine), with POD_IP from
 * status.podIP; and `extraArgs` (tests pass `--namespace <test namespace>` so the controller
 * never acts on other tests' objects, and short leader-election timings).
 */
export function controllerPod(install: OperatorInstall, name: string, extraArgs: string[]): V1Pod {
  const t = structuredClone(install.deployment.spec!.template);
  const c = t.spec!.containers[0]!;
  c.env = [...(c.env ?? []), { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }];
  c.args = [...(c.args ?? []), '--metrics-bind-address=$(POD_IP):8080', ...extraArgs];
  return { apiVersion: 'v1', kind: 'Pod', metadata: { ...t.metadata, name, namespace: install.namespace }, spec: t.spec };
}

/** Creates a controller pod; throws with the API server's answer when it is refused. */
export async function createControllerPod(
  cluster: TestCluster,
  install: OperatorInstall,
  name: string,
  extraArgs: string[],
): Promise<V1Pod> {
  return kubeRequestOk<V1Pod>(cluster.kc, 'POST', apiPath('v1', 'pods', install.namespace), controllerPod(install, name, extraArgs));
}
