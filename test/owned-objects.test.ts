// Which owned objects the controller re-applies (server-side apply) and which it leaves: a
// pure comparison of the rendered object with the cached one, table-tested here; the
// real-cluster check that an edit by hand is reverted is in controller-lifecycle.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  renderPDB,
  renderPodRole,
  renderRole,
  renderRoleBinding,
  renderService,
  renderServiceAccount,
} from '../src/controller/resources/index.js';
import { AppliedVersions, covers, ownedDrift } from '../src/controller/reconcile/owned-objects.js';
import type { AtlantisDeployment } from '../src/controller/types.js';
import type { KubeObject } from '../src/k8s/informer.js';

const ad = {
  apiVersion: 'atlantis-operator.dev/v1alpha1',
  kind: 'AtlantisDeployment',
  metadata: { name: 'atl', namespace: 'infra', uid: 'uid-1', generation: 1 },
  spec: {
    image: 'img:1',
    replicas: 2,
    atlantis: {
      url: 'https://a.example.com',
      repoAllowlist: 'github.com/acme/*',
      github: { user: 'bot', tokenSecretRef: { name: 'vcs', key: 't' }, webhookSecretRef: { name: 'vcs', key: 'w' } },
    },
  },
} as unknown as AtlantisDeployment;

const clone = <T>(x: T): T => structuredClone(x);

/** What the API server returns for a rendered object: its own fields and defaults added. */
function asStored(o: KubeObject, extra: Record<string, unknown> = {}): KubeObject {
  const c = clone(o) as KubeObject & Record<string, unknown>;
  c.metadata = { ...c.metadata, uid: 'u-1', resourceVersion: '100', managedFields: [{ manager: 'atlantis-operator', operation: 'Apply' }] };
  return Object.assign(c, extra);
}

test('covers: maps may hold more, lists must match in length, an empty list stands for an absent one, unset fields are not ours', () => {
  const rows: Array<[actual: unknown, wanted: unknown, expected: boolean]> = [
    [{ a: 1, b: 2 }, { a: 1 }, true],
    [{ a: 2 }, { a: 1 }, false],
    [{}, { a: 1 }, false],
    [[{ port: 80, protocol: 'TCP' }], [{ port: 80 }], true],
    [[{ port: 80 }, { port: 81 }], [{ port: 80 }], false],
    [[{ port: 81 }], [{ port: 80 }], false],
    [undefined, [], true],
    [null, {}, true],
    [undefined, '', true],
    [{ 'atlantis-operator.dev/desired-hash': 'old' }, undefined, true],
    [{ team: 'infra' }, {}, true],
    [[{ verbs: ['*'] }], [], false],
    [[], [1], false],
    ['4141', 4141, false],
    [{ a: [1] }, { a: [] }, false],
    ['x', { a: 1 }, false],
    [[1], { 0: 1 }, false],
  ];
  for (const [actual, wanted, expected] of rows)
    assert.equal(covers(actual, wanted), expected, `${JSON.stringify(actual)} covers ${JSON.stringify(wanted)}`);
});

test('ownedDrift: none for what the API server stored from our render (with its defaults), for every owned kind', () => {
  const rendered: KubeObject[] = [
    renderServiceAccount(ad),
    renderRole(ad, []),
    renderRole(ad, [0, 1]),
    renderPodRole(ad, 0),
    renderRoleBinding(ad),
    renderPDB(ad),
    renderService(ad),
  ];
  for (const r of rendered) {
    const stored = asStored(r);
    if (r.kind === 'Service')
      Object.assign((stored as unknown as { spec: Record<string, unknown> }).spec, {
        clusterIP: '10.0.0.7',
        clusterIPs: ['10.0.0.7'],
        sessionAffinity: 'None',
        ipFamilies: ['IPv4'],
      });
    if (r.kind === 'Role' && ((r as { rules?: unknown[] }).rules ?? []).length === 0) delete (stored as { rules?: unknown[] }).rules;
    if (r.kind === 'PodDisruptionBudget') (stored as unknown as Record<string, unknown>).status = { currentHealthy: 2 };
    assert.equal(ownedDrift(r, stored), false, `${r.kind} ${r.metadata?.name}`);
  }
  assert.equal(ownedDrift(renderService(ad), undefined), true, 'missing: created');
});

test('ownedDrift: an edit by someone else to a field we set is drift', () => {
  const svc = renderService(ad) as unknown as KubeObject & {
    spec: { selector: Record<string, string>; ports: Array<Record<string, unknown>> };
  };
  const edits: Array<[string, (s: typeof svc) => void]> = [
    [
      'selector value',
      (s) => {
        s.spec.selector['app.kubernetes.io/instance'] = 'other';
      },
    ],
    [
      'targetPort',
      (s) => {
        s.spec.ports[0]!.targetPort = 8080;
      },
    ],
    [
      'a port added',
      (s) => {
        s.spec.ports.push({ name: 'x', port: 81 });
      },
    ],
    [
      'our label removed',
      (s) => {
        delete s.metadata!.labels!['app.kubernetes.io/managed-by'];
      },
    ],
    [
      'ownerReference removed',
      (s) => {
        s.metadata!.ownerReferences = [];
      },
    ],
  ];
  for (const [what, edit] of edits) {
    const stored = asStored(svc);
    edit(stored as typeof svc);
    assert.equal(ownedDrift(svc, stored), true, what);
  }
  const extraLabel = asStored(svc);
  extraLabel.metadata!.labels = { ...extraLabel.metadata!.labels, team: 'infra' };
  assert.equal(ownedDrift(svc, extraLabel), false, 'a label of someone else is theirs: not drift');
  const older = asStored(svc);
  older.metadata!.annotations = { 'atlantis-operator.dev/desired-hash': 'written by an older controller' };
  assert.equal(
    ownedDrift(svc, older),
    false,
    'an annotation we do not render is not ours: objects of an older controller are not re-applied',
  );
  const emptyRole = asStored(renderRole(ad, []));
  (emptyRole as { rules?: unknown[] }).rules = [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }];
  assert.equal(ownedDrift(renderRole(ad, []), emptyRole), true, 'a rule added to a Role we keep empty');

  const role = renderPodRole(ad, 0) as KubeObject & { rules: Array<{ verbs: string[]; resourceNames?: string[] }> };
  const wider = asStored(role) as typeof role;
  wider.rules[0]!.resourceNames = ['atl-0', 'atl-1'];
  assert.equal(ownedDrift(role, wider), true, 'a Role widened to a sibling pod');
  const more = asStored(role) as typeof role;
  more.rules.push({ verbs: ['*'] });
  assert.equal(ownedDrift(role, more), true, 'a rule added');
  const emptied = asStored(renderRole(ad, [0]));
  delete (emptied as { rules?: unknown }).rules;
  assert.equal(ownedDrift(renderRole(ad, [0]), emptied), true, 'rules removed');
});

test('AppliedVersions: a cached copy no newer than our last apply is ours; newer ones, other keys and uids are not', () => {
  const v = new AppliedVersions();
  const at = (rv: string, uid = 'u-1'): KubeObject => ({ metadata: { uid, resourceVersion: rv } });
  assert.equal(v.ours('ns/a', at('5')), false, 'nothing applied yet');
  v.record('ns/a', at('10'));
  assert.equal(v.ours('ns/a', at('10')), true, 'the cache shows our apply');
  assert.equal(v.ours('ns/a', at('9')), true, 'the cache lags behind our apply');
  assert.equal(v.ours('ns/a', at('11')), false, 'changed by someone after our apply');
  assert.equal(v.ours('ns/a', at('10', 'u-2')), false, 'another object');
  assert.equal(v.ours('ns/b', at('10')), false, 'another AtlantisDeployment');
  assert.equal(v.ours('ns/a', at('x')), false, 'unparsable version');
  v.forget('ns/a');
  assert.equal(v.ours('ns/a', at('10')), false, 'forgotten with its AtlantisDeployment');
});
