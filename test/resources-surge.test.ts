// What a surge changes outside the planner: the Roles follow the pods' names (old and new of
// an ordinal, and the one created next), and the surge pods gauge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { createControllerMetrics } from '../src/controller/metrics.js';
import {
  accessPodNames,
  podNameFor,
  renderPod,
  renderPodRole,
  renderRole,
  serverAccess,
  type PodNaming,
} from '../src/controller/resources/index.js';
import type { AtlantisDeployment } from '../src/controller/types.js';

const OLD = 'aaaaaaaaaa';
const NEW = 'bbbbbbbbbb';

const ad = (spec: Partial<AtlantisDeployment['spec']> = {}): AtlantisDeployment => ({
  apiVersion: 'atlantis-operator.dev/v1alpha1',
  kind: 'AtlantisDeployment',
  metadata: { name: 'web', namespace: 'infra', uid: 'uid-1' },
  spec: { image: 'i', replicas: 2, ...spec },
});
/** A pod of the ordinal as the controller creates it, under `name`. */
const named = (a: AtlantisDeployment, ordinal: number, name: string): { ordinal: number; pod: V1Pod } => {
  const pod = renderPod(a, ordinal);
  return { ordinal, pod: { ...pod, metadata: { ...pod.metadata, name } } };
};
const resourceNames = (role: { rules?: Array<{ resourceNames?: string[] }> }): string[] => role.rules?.[0]?.resourceNames ?? [];

function roles(a: AtlantisDeployment, existing: Array<{ ordinal: number; pod: V1Pod }>, naming: PodNaming, replicas = 2) {
  const access = serverAccess(a, replicas, existing);
  const names = accessPodNames(a, access, existing, (i) => podNameFor('web', i, NEW, naming));
  return {
    shared: resourceNames(renderRole(a, access.shared, names.shared)),
    perPod: new Map(access.perPod.map((i) => [i, resourceNames(renderPodRole(a, i, names.perPod.get(i)))])),
  };
}

test('pods named by ordinal: each Role names what it named before', () => {
  const a = ad();
  const existing = [named(a, 0, 'web-0'), named(a, 1, 'web-1')];
  const r = roles(a, existing, 'ordinal');
  assert.deepEqual(
    r.perPod,
    new Map([
      [0, ['web-0']],
      [1, ['web-1']],
    ]),
  );
  for (const i of [0, 1]) assert.deepEqual(r.perPod.get(i), resourceNames(renderPodRole(a, i)), 'same as without names');
  assert.deepEqual(r.shared, [], 'no pod runs as the instance-wide account');
});

test('pods named by revision: an ordinal Role names its old pod, its new pod and no other ordinal', () => {
  const a = ad();
  const before = [named(a, 0, `web-0-${OLD}`), named(a, 1, `web-1-${OLD}`)];
  // Before the surge: the pod the rollout creates next is named already, so it can read itself at once.
  assert.deepEqual(
    roles(a, before, 'revision').perPod,
    new Map([
      [0, [`web-0-${OLD}`, `web-0-${NEW}`]],
      [1, [`web-1-${OLD}`, `web-1-${NEW}`]],
    ]),
  );
  // Mid-surge: both pods of ordinal 1 exist (the old one terminating still watches its Pod).
  const terminating = named(a, 1, `web-1-${OLD}`);
  terminating.pod.metadata!.deletionTimestamp = new Date();
  const mid = [named(a, 0, `web-0-${OLD}`), terminating, named(a, 1, `web-1-${NEW}`)];
  const r = roles(a, mid, 'revision');
  assert.deepEqual(r.perPod.get(1), [`web-1-${OLD}`, `web-1-${NEW}`]);
  for (const [i, names] of r.perPod)
    for (const n of names) assert.match(n, new RegExp(`^web-${i}-`), `ordinal ${i} names only its own pods`);
  // The old pod gone: its name leaves the Role.
  assert.deepEqual(roles(a, [named(a, 0, `web-0-${NEW}`), named(a, 1, `web-1-${NEW}`)], 'revision').perPod.get(1), [`web-1-${NEW}`]);
});

test('a scale-down keeps the extra ordinal Role on its existing pod; a custom account covers every pod', () => {
  const a = ad();
  const existing = [named(a, 0, `web-0-${NEW}`), named(a, 1, `web-1-${NEW}`), named(a, 2, `web-2-${OLD}`)];
  assert.deepEqual(roles(a, existing, 'revision').perPod.get(2), [`web-2-${OLD}`, `web-2-${NEW}`]);
  const custom = ad({ podTemplate: { spec: { serviceAccountName: 'custom-sa' } } });
  const c = roles(custom, existing, 'revision');
  assert.deepEqual(c.perPod, new Map());
  assert.deepEqual(c.shared, [`web-0-${NEW}`, `web-1-${NEW}`, `web-2-${OLD}`, `web-2-${NEW}`]);
});

test('pods made before accounts were per pod: the instance-wide Role names only them', () => {
  const a = ad();
  const legacy = named(a, 1, 'web-1');
  legacy.pod.spec!.serviceAccountName = 'web-atlantis';
  const r = roles(a, [named(a, 0, `web-0-${NEW}`), legacy], 'revision');
  assert.deepEqual(r.shared, ['web-1']);
  assert.deepEqual(r.perPod.get(1), ['web-1', `web-1-${NEW}`]);
});

test('atlantis_operator_surge_pods sums status.surgeReplicas over the AtlantisDeployments', async () => {
  const m = createControllerMetrics();
  const value = async (): Promise<string | undefined> =>
    (await m.registry.metrics()).split('\n').find((l) => l.startsWith('atlantis_operator_surge_pods '));
  assert.equal(await value(), 'atlantis_operator_surge_pods 0');
  m.setSurgePods('a/web', 1);
  m.setSurgePods('b/web', 2);
  assert.equal(await value(), 'atlantis_operator_surge_pods 3');
  m.setSurgePods('b/web', 0);
  assert.equal(await value(), 'atlantis_operator_surge_pods 1');
  m.forgetDeployment('a/web');
  assert.equal(await value(), 'atlantis_operator_surge_pods 0');
  assert.match(await m.registry.metrics(), /# TYPE atlantis_operator_surge_pods gauge/);
});
