// Render functions: what the controller asks the API server to create.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EnvVar } from '@kubernetes/client-node';
import {
  canonicalJSON,
  drainTiming,
  goDuration,
  hashRevision,
  MIN_GRACE_SECONDS,
  parseOrdinal,
  podTemplateRevision,
  drainPatch,
  drainStartedPatch,
  podDeleteOptions,
  renderEvent,
  renderPDB,
  renderPod,
  renderPVC,
  renderRole,
  renderRoleBinding,
  renderService,
  renderServiceAccount,
  renderPodRole,
  renderPodRoleBinding,
  renderPodServiceAccount,
  roleOrdinals,
  serverAccess,
  selectorString,
  withDefaults,
} from '../src/controller/resources/index.js';
import type { AtlantisDeployment, AtlantisDeploymentSpecInput } from '../src/controller/types.js';

function ad(spec: Partial<AtlantisDeploymentSpecInput> = {}, name = 'atlantis'): AtlantisDeployment {
  return {
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    metadata: { name, namespace: 'infra', uid: 'uid-1', generation: 1 },
    spec: {
      image: 'ghcr.io/acme/atlantis-operator:1.0.0',
      atlantis: {
        url: 'https://atlantis.example.com',
        repoAllowlist: 'github.com/acme/*',
        github: {
          user: 'atlantis-bot',
          tokenSecretRef: { name: 'vcs', key: 'token' },
          webhookSecretRef: { name: 'vcs', key: 'webhook-secret' },
        },
      },
      ...spec,
    },
  };
}

const envOf = (list: V1EnvVar[] | undefined, name: string): V1EnvVar | undefined => list?.find((e) => e.name === name);

test('drain timing formula', async (t) => {
  const rows: Array<[grace: number, drain: number, interrupt: number]> = [
    [30, 10, 10],
    [60, 30, 20],
    [120, 70, 40],
    [180, 110, 60],
    [600, 530, 60],
    [3600, 3530, 60],
    [10, 10, 10], // below the CRD minimum: clamped to 30 rather than producing a negative timeout
  ];
  for (const [grace, drain, interrupt] of rows) {
    await t.test(`grace ${grace}s`, () => {
      const timing = drainTiming(grace);
      assert.equal(timing.drainTimeoutSeconds, drain);
      assert.equal(timing.interruptGraceSeconds, interrupt);
      assert.ok(timing.drainTimeoutSeconds + timing.interruptGraceSeconds + timing.marginSeconds <= Math.max(grace, MIN_GRACE_SECONDS));
      assert.ok(timing.drainTimeoutSeconds >= 10 && timing.interruptGraceSeconds >= 10);
    });
  }
  assert.equal(goDuration(50), '50s');
});

test('every grace period from the minimum up fits drain + interrupt + margin', () => {
  for (let g = MIN_GRACE_SECONDS; g <= 5000; g++) {
    const timing = drainTiming(g);
    assert.equal(timing.drainTimeoutSeconds + timing.interruptGraceSeconds + timing.marginSeconds, g);
    assert.ok(timing.drainTimeoutSeconds > 0 && timing.interruptGraceSeconds > 0, `grace ${g}`);
  }
});

test('defaults match the CRD', () => {
  const d = withDefaults({ image: 'x' });
  assert.deepEqual(d, {
    image: 'x',
    replicas: 1,
    atlantis: { lockingDB: { type: 'boltdb' } },
    storage: { size: '5Gi', storageClassName: null },
    updateStrategy: { maxUnavailable: 1, maxSurge: 0, drainTimeoutSeconds: 3600, onDrainTimeout: 'Wait' },
    paused: false,
    terminationGracePeriodSeconds: 120,
    service: { type: 'ClusterIP', port: 80 },
  });
  assert.equal(withDefaults({ image: 'x', replicas: 0 }).replicas, 0, 'an explicit 0 is kept');
});

test('canonical JSON ignores key order and undefined members', () => {
  assert.equal(canonicalJSON({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: undefined } }), '{"a":{"d":[1,{"x":1,"y":2}]},"b":1}');
  // As JSON.stringify for what it keeps: undefined in arrays is null, Dates are ISO strings,
  // escaping is JSON's; keys sort by code unit (upper case first).
  const when = new Date('2026-11-30T10:00:00.000Z');
  const value = { z: [undefined, null, 'a"b\n', 1.5, true], B: { when }, a: {}, '\u00e9': [] };
  assert.equal(canonicalJSON(value), '{"B":{"when":"2026-11-30T10:00:00.000Z"},"a":{},"z":[null,null,"a\\"b\\n",1.5,true],"\u00e9":[]}');
  assert.deepEqual(JSON.parse(canonicalJSON(value)), JSON.parse(JSON.stringify(value)));
  assert.equal(hashRevision({ a: 1, b: 2 }), hashRevision({ b: 2, a: 1 }));
  assert.match(hashRevision({}), /^[0-9a-f]{10}$/);
});

test('revision: what changes it and what does not', async (t) => {
  const base = podTemplateRevision(ad());
  const rows: Array<[string, Partial<AtlantisDeploymentSpecInput>, boolean]> = [
    ['same spec', {}, false],
    ['replicas', { replicas: 5 }, false],
    ['paused', { paused: true }, false],
    ['update strategy', { updateStrategy: { maxUnavailable: 3, drainTimeoutSeconds: 5, onDrainTimeout: 'Interrupt' } }, false],
    ['service', { service: { type: 'LoadBalancer', port: 8080 } }, false],
    ['storage size and class', { storage: { size: '50Gi', storageClassName: 'fast' } }, false],
    ['image tag', { image: 'ghcr.io/acme/atlantis-operator:1.0.1' }, true],
    ['grace period (drain timeout env changes too)', { terminationGracePeriodSeconds: 300 }, true],
    [
      'podTemplate annotation (rollout restart)',
      { podTemplate: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-01-01T00:00:00Z' } } } },
      true,
    ],
    ['podTemplate label', { podTemplate: { metadata: { labels: { team: 'infra' } } } }, true],
    ['resources', { podTemplate: { spec: { resources: { requests: { cpu: '1' } } } } }, true],
    ['nodeSelector', { podTemplate: { spec: { nodeSelector: { pool: 'x' } } } }, true],
    ['user env', { atlantis: { env: [{ name: 'ATLANTIS_LOG_LEVEL', value: 'debug' }] } }, true],
    ['repo allowlist', { atlantis: { repoAllowlist: 'github.com/other/*' } }, true],
  ];
  for (const [label, change, differs] of rows) {
    await t.test(label, () => {
      const base2 = ad();
      const changed: AtlantisDeployment = { ...base2, spec: { ...base2.spec, ...change } };
      assert.equal(podTemplateRevision(changed) !== base, differs);
    });
  }
});

test('pod for an ordinal', () => {
  const a = ad({
    terminationGracePeriodSeconds: 120,
    podTemplate: { metadata: { labels: { team: 'infra', 'app.kubernetes.io/instance': 'hijack' }, annotations: { note: 'x' } } },
  });
  const rev = podTemplateRevision(a);
  const pod = renderPod(a, 2);
  assert.equal(pod.metadata?.name, 'atlantis-2');
  assert.equal(pod.metadata?.namespace, 'infra');
  assert.deepEqual(pod.metadata?.labels, {
    team: 'infra',
    'app.kubernetes.io/name': 'atlantis',
    'app.kubernetes.io/instance': 'atlantis',
    'app.kubernetes.io/managed-by': 'atlantis-operator',
    'atlantis-operator.dev/ordinal': '2',
    'atlantis-operator.dev/revision': rev,
  });
  assert.deepEqual(pod.metadata?.annotations, { note: 'x' });
  assert.deepEqual(pod.metadata?.ownerReferences, [
    {
      apiVersion: 'atlantis-operator.dev/v1alpha1',
      kind: 'AtlantisDeployment',
      name: 'atlantis',
      uid: 'uid-1',
      controller: true,
      blockOwnerDeletion: true,
    },
  ]);
  const spec = pod.spec!;
  assert.equal(spec.terminationGracePeriodSeconds, 120);
  assert.equal(spec.serviceAccountName, 'atlantis-atlantis-2', 'each ordinal runs as its own account');
  assert.equal(spec.enableServiceLinks, false);
  assert.equal(spec.securityContext?.runAsNonRoot, true);
  assert.deepEqual(spec.volumes, [{ name: 'data', persistentVolumeClaim: { claimName: 'atlantis-data-2' } }]);
  const c = spec.containers[0]!;
  assert.equal(c.name, 'atlantis');
  assert.deepEqual(c.args, ['server']);
  assert.equal(c.image, 'ghcr.io/acme/atlantis-operator:1.0.0');
  assert.deepEqual(c.volumeMounts, [{ name: 'data', mountPath: '/atlantis' }]);
  assert.deepEqual(c.readinessProbe?.httpGet, { path: '/readyz', port: 4141 });
  assert.deepEqual(c.livenessProbe?.httpGet, { path: '/healthz', port: 4141 });
  assert.deepEqual(c.startupProbe?.httpGet, { path: '/healthz', port: 4141 });
  assert.equal(
    (c.startupProbe?.periodSeconds ?? 0) * (c.startupProbe?.failureThreshold ?? 0),
    300,
    'a slow start gets 5 minutes before liveness counts',
  );
  assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL']);
  assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
  assert.deepEqual(
    c.env?.map((e) => e.name),
    [
      'ATLANTIS_PORT',
      'ATLANTIS_DATA_DIR',
      'ATLANTIS_ATLANTIS_URL',
      'ATLANTIS_REPO_ALLOWLIST',
      'ATLANTIS_GH_USER',
      'ATLANTIS_GH_TOKEN',
      'ATLANTIS_GH_WEBHOOK_SECRET',
      'ATLANTIS_DRAIN_TIMEOUT',
      'ATLANTIS_TERRAFORM_INTERRUPT_GRACE',
      'POD_NAME',
      'POD_NAMESPACE',
    ],
  );
  assert.equal(envOf(c.env, 'ATLANTIS_PORT')?.value, '4141');
  assert.equal(envOf(c.env, 'ATLANTIS_DATA_DIR')?.value, '/atlantis');
  assert.equal(envOf(c.env, 'ATLANTIS_DRAIN_TIMEOUT')?.value, '70s');
  assert.equal(envOf(c.env, 'ATLANTIS_TERRAFORM_INTERRUPT_GRACE')?.value, '40s');
  assert.deepEqual(envOf(c.env, 'ATLANTIS_GH_TOKEN')?.valueFrom, { secretKeyRef: { name: 'vcs', key: 'token' } });
  assert.equal(envOf(c.env, 'ATLANTIS_GH_TOKEN')?.value, undefined, 'the token is never inlined');
  assert.deepEqual(envOf(c.env, 'POD_NAME')?.valueFrom, { fieldRef: { fieldPath: 'metadata.name' } });
  assert.deepEqual(envOf(c.env, 'POD_NAMESPACE')?.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } });
});

test('pods of two ordinals differ only in per-ordinal parts and share the revision', () => {
  const a = ad();
  const p0 = renderPod(a, 0);
  const p1 = renderPod(a, 1);
  assert.equal(p0.metadata?.labels?.['atlantis-operator.dev/revision'], p1.metadata?.labels?.['atlantis-operator.dev/revision']);
  assert.deepEqual({ ...p0.spec, volumes: [], serviceAccountName: '' }, { ...p1.spec, volumes: [], serviceAccountName: '' });
  assert.deepEqual([p0.spec?.serviceAccountName, p1.spec?.serviceAccountName], ['atlantis-atlantis-0', 'atlantis-atlantis-1']);
});

test('user env is appended last and podTemplate fields are applied', () => {
  const a = ad({
    atlantis: {
      env: [
        { name: 'ATLANTIS_LOG_LEVEL', value: 'debug' },
        { name: 'ATLANTIS_GH_USER', value: 'other-bot' },
      ],
    },
    podTemplate: {
      spec: {
        resources: { requests: { cpu: '250m', memory: '256Mi' } },
        nodeSelector: { pool: 'tf' },
        tolerations: [{ key: 'tf', operator: 'Exists', effect: 'NoSchedule' }],
        securityContext: { runAsUser: 4242 },
        serviceAccountName: 'custom-sa',
      },
    },
  });
  const pod = renderPod(a, 0);
  const env = pod.spec!.containers[0]!.env!;
  assert.deepEqual(env.slice(-2), [
    { name: 'ATLANTIS_LOG_LEVEL', value: 'debug' },
    { name: 'ATLANTIS_GH_USER', value: 'other-bot' },
  ]);
  assert.equal(envOf(env, 'ATLANTIS_ATLANTIS_URL'), undefined, 'unset settings are not rendered');
  assert.deepEqual(pod.spec!.containers[0]!.resources, { requests: { cpu: '250m', memory: '256Mi' } });
  assert.deepEqual(pod.spec!.nodeSelector, { pool: 'tf' });
  assert.equal(pod.spec!.tolerations?.length, 1);
  assert.equal(pod.spec!.securityContext?.runAsUser, 4242);
  assert.equal(pod.spec!.securityContext?.runAsNonRoot, true, 'defaults kept where the user set nothing');
  assert.equal(pod.spec!.serviceAccountName, 'custom-sa');
  assert.equal(renderPod(a, 3).spec!.serviceAccountName, 'custom-sa', 'every ordinal runs as the custom account');
  assert.equal(renderRoleBinding(a).subjects?.[0]?.name, 'custom-sa', 'the Role is bound to the account the pods use');
  const pods = [0, 1].map((ordinal) => ({ ordinal, pod: renderPod(a, ordinal) }));
  assert.deepEqual(serverAccess(a, 2, pods), { shared: [0, 1], perPod: [] }, 'one account for all pods: the shared Role covers them all');
});

test('PVC', () => {
  const pvc = renderPVC(ad({ storage: { size: '20Gi' } }), 3);
  assert.equal(pvc.metadata?.name, 'atlantis-data-3');
  assert.equal(pvc.metadata?.labels?.['atlantis-operator.dev/ordinal'], '3');
  assert.equal(pvc.metadata?.ownerReferences?.[0]?.uid, 'uid-1');
  assert.deepEqual(pvc.spec, { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '20Gi' } } });
  assert.equal(renderPVC(ad({ storage: { size: '1Gi', storageClassName: 'fast' } }), 0).spec?.storageClassName, 'fast');
  assert.equal(renderPVC(ad(), 0).spec?.resources?.requests?.storage, '5Gi');
});

test('Service', () => {
  const svc = renderService(ad({ service: { type: 'NodePort', port: 8080 } }));
  assert.equal(svc.metadata?.name, 'atlantis');
  assert.equal(svc.spec?.type, 'NodePort');
  assert.deepEqual(svc.spec?.ports, [{ name: 'http', port: 8080, targetPort: 4141, protocol: 'TCP' }]);
  assert.deepEqual(svc.spec?.selector, { 'app.kubernetes.io/name': 'atlantis', 'app.kubernetes.io/instance': 'atlantis' });
  assert.equal(renderService(ad()).spec?.ports?.[0]?.port, 80);
  assert.equal(selectorString('web'), 'app.kubernetes.io/name=atlantis,app.kubernetes.io/instance=web');
});

test('ServiceAccount, Role, RoleBinding', () => {
  const a = ad({}, 'web');
  assert.equal(renderServiceAccount(a).metadata?.name, 'web-atlantis');
  const role = renderRole(a, roleOrdinals(2, [3, 1]));
  assert.deepEqual(role.rules, [
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'], resourceNames: ['web-0', 'web-1', 'web-3'] },
  ]);
  assert.deepEqual(renderRole(a, []).rules, [], 'no pods: no rule (an empty resourceNames would grant all pods)');
  const rb = renderRoleBinding(a);
  assert.deepEqual(rb.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'web-atlantis' });
  assert.deepEqual(rb.subjects, [{ kind: 'ServiceAccount', name: 'web-atlantis', namespace: 'infra' }]);
  for (const obj of [renderServiceAccount(a), role, rb]) assert.equal(obj.metadata?.ownerReferences?.[0]?.controller, true);
});

test('per-pod ServiceAccount, Role, RoleBinding: a pod reads its own Pod and no sibling', () => {
  const a = ad({}, 'web');
  assert.equal(renderPodServiceAccount(a, 1).metadata?.name, 'web-atlantis-1');
  assert.deepEqual(renderPodRole(a, 1).rules, [
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'], resourceNames: ['web-1'] },
  ]);
  const rb = renderPodRoleBinding(a, 1);
  assert.deepEqual(rb.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'web-atlantis-1' });
  assert.deepEqual(rb.subjects, [{ kind: 'ServiceAccount', name: 'web-atlantis-1', namespace: 'infra' }]);
  for (const obj of [renderPodServiceAccount(a, 1), renderPodRole(a, 1), rb]) {
    assert.equal(obj.metadata?.ownerReferences?.[0]?.controller, true);
    assert.equal(obj.metadata?.labels?.['app.kubernetes.io/managed-by'], 'atlantis-operator', 'seen by the owned-object informers');
  }
  // Desired ordinals plus existing higher ones get their own; the shared Role covers only
  // pods still running as the instance-wide account (made before accounts were per pod).
  const legacy = renderPod(a, 3);
  legacy.spec!.serviceAccountName = 'web-atlantis';
  const existing = [
    { ordinal: 0, pod: renderPod(a, 0) },
    { ordinal: 3, pod: legacy },
  ];
  assert.deepEqual(serverAccess(a, 2, existing), { shared: [3], perPod: [0, 1, 3] });
  assert.deepEqual(serverAccess(a, 2, [{ ordinal: 0, pod: renderPod(a, 0) }]), { shared: [], perPod: [0, 1] });
  assert.deepEqual(renderRole(a, serverAccess(a, 2, []).shared).rules, [], 'no legacy pod: the shared Role grants nothing');
  // The account is per ordinal, not in the revision: the template is the same for every ordinal.
  assert.equal(
    renderPod(a, 0).metadata?.labels?.['atlantis-operator.dev/revision'],
    renderPod(a, 5).metadata?.labels?.['atlantis-operator.dev/revision'],
  );
});

test('PodDisruptionBudget', () => {
  const pdb = renderPDB(ad({ replicas: 5, updateStrategy: { maxUnavailable: 2 } }));
  assert.equal(pdb.apiVersion, 'policy/v1');
  // replicas - maxUnavailable as an integer: no scale lookups by the disruption controller
  assert.equal(pdb.spec?.minAvailable, 3);
  assert.equal(pdb.spec?.maxUnavailable, undefined);
  assert.deepEqual(pdb.spec?.selector?.matchLabels, { 'app.kubernetes.io/name': 'atlantis', 'app.kubernetes.io/instance': 'atlantis' });
  assert.equal(renderPDB(ad()).spec?.minAvailable, 0, 'defaults: 1 replica, maxUnavailable 1');
  assert.equal(renderPDB(ad({ replicas: 1, updateStrategy: { maxUnavailable: 3 } })).spec?.minAvailable, 0, 'never negative');
});

test('ordinal label parsing', () => {
  const rows: Array<[string | undefined, number | null]> = [
    ['0', 0],
    ['12', 12],
    ['-1', null],
    ['01', null],
    ['a', null],
    ['', null],
    [undefined, null],
    ['1.5', null],
  ];
  for (const [input, want] of rows) assert.equal(parseOrdinal(input), want, String(input));
});

test('an AtlantisDeployment without a uid cannot own objects', () => {
  const a = ad();
  delete a.metadata.uid;
  assert.throws(() => renderPod(a, 0), /uid/);
});

test('Event about the AtlantisDeployment', () => {
  const a = ad();
  a.metadata.resourceVersion = '42';
  const now = new Date('2026-06-01T12:00:00Z');
  const ev = renderEvent(
    a,
    { eventType: 'Warning', reason: 'DrainTimeout', message: 'x'.repeat(2000) },
    now,
    '18a2b3c4d5e6f7a8',
    'atlantis-operator-abc',
  );
  assert.equal(ev.metadata?.name, 'atlantis.18a2b3c4d5e6f7a8');
  assert.equal(ev.metadata?.namespace, 'infra');
  assert.deepEqual(ev.involvedObject, {
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    name: 'atlantis',
    namespace: 'infra',
    uid: 'uid-1',
    resourceVersion: '42',
  });
  assert.equal(ev.type, 'Warning');
  assert.equal(ev.reason, 'DrainTimeout');
  assert.equal(ev.message?.length, 1024, 'long messages are cut to the API limit');
  assert.equal(ev.reportingComponent, 'atlantis-operator');
  assert.equal(ev.reportingInstance, 'atlantis-operator-abc');
  assert.equal(ev.count, 1);
});

test('pod patches carry the uid; deletes have a uid precondition', () => {
  assert.deepEqual(drainPatch('u1', '2026-06-01T12:00:00Z'), {
    metadata: { uid: 'u1', annotations: { 'atlantis-operator.dev/drain': '2026-06-01T12:00:00Z' } },
  });
  assert.deepEqual(drainStartedPatch('u1', 't'), {
    metadata: { uid: 'u1', annotations: { 'atlantis-operator.dev/drain-started-at': 't' } },
  });
  assert.deepEqual(podDeleteOptions('u1'), { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: 'u1' } });
});
