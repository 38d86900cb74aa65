// The lifecycle of one AtlantisDeployment on the real local control plane, with the
// in-process controller (SPEC sections 6 and 7): what it creates and owns, its status, an idle
// rollout (`kubectl rollout restart` style) replacing pods highest ordinal first one at a
// time with the Events of SPEC 7.7 while the PVC data survives, scale 3 -> 1 -> 2 keeping
// and reusing PVCs, `paused`, and deletion through the garbage collector leaving nothing
// running. The steps build on each other and run in order.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { MERGE_PATCH, apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { API_VERSION, KIND, PLURAL, type AtlantisDeployment } from '../src/controller/types.js';
import {
  atlantisDeployment,
  createAd,
  events,
  getAd,
  listPods,
  patchAdSpec,
  startController,
  type TestController,
} from './support/controller.js';
import { controllerTestNamespace, stopTestController } from './support/controller-suite.js';
import {
  DRAIN,
  REVISION,
  cond,
  eventsSince,
  describePods,
  recordPods,
  rolloutComplete,
  serverStatus,
  sleep,
  waitForAd,
  waitForReadyPods,
} from './support/controller-asserts.js';
import { getLocalNode, waitFor, type LocalNodeHandle, type TestCluster } from './support/k8s.js';

const NAME = 'life';
let cluster: TestCluster;
let node: LocalNodeHandle;
let ctrl: TestController;
let ns: string;
let adUid: string;

before(async () => {
  ({ cluster, ns } = await controllerTestNamespace('ctrl-life'));
  node = await getLocalNode();
  ctrl = await startController(cluster.kc, ns);
});
after(() => stopTestController(ctrl));

const pvcs = async (): Promise<V1PersistentVolumeClaim[]> =>
  (
    await kubeRequestOk<{ items: V1PersistentVolumeClaim[] }>(cluster.kc, 'GET', apiPath('v1', 'persistentvolumeclaims', ns), undefined, {
      query: { labelSelector: `app.kubernetes.io/instance=${NAME}` },
    })
  ).items;
const pvcUid = async (claim: string): Promise<string> =>
  (await kubeRequestOk<V1PersistentVolumeClaim>(cluster.kc, 'GET', apiPath('v1', 'persistentvolumeclaims', ns, claim))).metadata!.uid!;
const revisionOf = (p: V1Pod): string => p.metadata!.labels![REVISION]!;
const claimOf = (p: V1Pod): string | undefined => p.spec?.volumes?.find((v) => v.persistentVolumeClaim)?.persistentVolumeClaim?.claimName;

const OWNED: Array<{ what: string; apiVersion: string; plural: string; name: string }> = [
  { what: 'Service', apiVersion: 'v1', plural: 'services', name: NAME },
  { what: 'ServiceAccount', apiVersion: 'v1', plural: 'serviceaccounts', name: `${NAME}-atlantis` },
  { what: 'Role', apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'roles', name: `${NAME}-atlantis` },
  { what: 'RoleBinding', apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'rolebindings', name: `${NAME}-atlantis` },
  // One account per pod, so a pod reads its own Pod and no sibling.
  ...[0, 1].flatMap((i) => [
    { what: `ServiceAccount of pod ${i}`, apiVersion: 'v1', plural: 'serviceaccounts', name: `${NAME}-atlantis-${i}` },
    { what: `Role of pod ${i}`, apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'roles', name: `${NAME}-atlantis-${i}` },
    { what: `RoleBinding of pod ${i}`, apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'rolebindings', name: `${NAME}-atlantis-${i}` },
  ]),
  { what: 'PodDisruptionBudget', apiVersion: 'policy/v1', plural: 'poddisruptionbudgets', name: NAME },
];

function assertOwnedByAd(
  obj: {
    metadata?: {
      ownerReferences?: Array<{ uid: string; kind: string; controller?: boolean; blockOwnerDeletion?: boolean }>;
      name?: string;
    };
  },
  what: string,
): void {
  const refs = obj.metadata?.ownerReferences ?? [];
  const ref = refs.find((r) => r.uid === adUid);
  assert.ok(
    ref,
    `${what} ${obj.metadata?.name} has an ownerReference to the AtlantisDeployment (uid ${adUid}); has ${JSON.stringify(refs)}`,
  );
  assert.equal(ref.kind, KIND);
  assert.equal(ref.controller, true, `${what}: controller: true`);
  assert.equal(ref.blockOwnerDeletion, true, `${what}: blockOwnerDeletion: true`);
}

/** Pods of the ns as the node ran them: the pid of a pod's server container, from the node's events. */
function serverPid(pod: V1Pod): number | undefined {
  const evs = node
    .events({ namespace: ns, pod: pod.metadata!.name! })
    .filter((e) => e.uid === pod.metadata!.uid && e.type === 'ContainerStarted' && e.pid);
  return evs.at(-1)?.pid;
}

describe('AtlantisDeployment lifecycle', () => {
  let revision0 = '';

  it('creates Ready pods, PVCs and the owned objects, and reports status', { timeout: 150_000 }, async () => {
    const created = await createAd(cluster.kc, atlantisDeployment(ns, NAME, { replicas: 2, terminationGracePeriodSeconds: 30 }));
    adUid = created.metadata.uid!;
    const pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], { timeoutMs: 120_000 });
    const ad = await waitForAd(cluster.kc, ns, NAME, 'status of a complete rollout', rolloutComplete(2));
    revision0 = ad.status!.updateRevision;
    assert.match(revision0, /^[0-9a-f]{10}$/, 'updateRevision is a 10-hex hash');

    for (const [i, p] of pods.entries()) {
      assert.equal(p.metadata!.name, `${NAME}-${i}`);
      assert.equal(p.status?.phase, 'Running');
      assert.equal(revisionOf(p), revision0, `${p.metadata!.name} carries the revision label of status.updateRevision`);
      assert.equal(p.metadata!.labels!['atlantis-operator.dev/ordinal'], String(i));
      assertOwnedByAd(p, 'Pod');
      const env = p.spec!.containers[0]!.env ?? [];
      assert.equal(
        env.find((e) => e.name === 'POD_NAME')?.valueFrom?.fieldRef?.fieldPath,
        'metadata.name',
        'POD_NAME from the downward API',
      );
      assert.equal(
        env.find((e) => e.name === 'POD_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath,
        'metadata.namespace',
        'POD_NAMESPACE from the downward API',
      );
      // --drain-timeout below the grace period: G=30 gives D=10s, I=10s (docs/controller.md).
      assert.equal(p.spec!.terminationGracePeriodSeconds, 30);
      assert.equal(env.find((e) => e.name === 'ATLANTIS_DRAIN_TIMEOUT')?.value, '10s');
      assert.equal(claimOf(p), `${NAME}-data-${i}`, 'the pod mounts the PVC of its ordinal');
      // The running process really got the downward-API values.
      const pid = serverPid(p);
      assert.ok(pid, `the node recorded the server process of ${p.metadata!.name}`);
      const environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      assert.ok(environ.includes(`POD_NAME=${NAME}-${i}`), `process ${pid} has POD_NAME=${NAME}-${i}`);
      assert.ok(environ.includes(`POD_NAMESPACE=${ns}`), `process ${pid} has POD_NAMESPACE=${ns}`);
      const st = await serverStatus(p.status!.podIP!);
      assert.ok(st, `${p.metadata!.name} answers /status on ${p.status!.podIP}:4141`);
      assert.equal(st.shutting_down, false);
    }

    const claims = await waitFor(
      'both PVCs Bound',
      async () => {
        const cs = await pvcs();
        return cs.length === 2 && cs.every((c) => c.status?.phase === 'Bound') ? cs : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(claims.map((c) => c.metadata!.name).sort(), [`${NAME}-data-0`, `${NAME}-data-1`]);
    for (const c of claims) {
      assertOwnedByAd(c, 'PersistentVolumeClaim');
      assert.equal(c.spec?.resources?.requests?.storage, '5Gi');
    }

    for (const o of OWNED) {
      const obj = await kubeRequestOk<{ metadata: { name: string; ownerReferences?: never[] }; spec?: Record<string, unknown> }>(
        cluster.kc,
        'GET',
        apiPath(o.apiVersion, o.plural, ns, o.name),
      );
      assertOwnedByAd(obj, o.what);
    }
    const svc = await kubeRequestOk<{ spec: { selector: Record<string, string>; ports: Array<{ port: number; targetPort: number }> } }>(
      cluster.kc,
      'GET',
      apiPath('v1', 'services', ns, NAME),
    );
    assert.equal(svc.spec.ports[0]!.port, 80);
    assert.equal(svc.spec.ports[0]!.targetPort, 4141);
    assert.equal(svc.spec.selector['app.kubernetes.io/instance'], NAME);
    // replicas 2 - maxUnavailable 1, as an integer minAvailable (resources/pdb.ts)
    const pdb = await kubeRequestOk<{ spec: { minAvailable?: number; maxUnavailable?: number } }>(
      cluster.kc,
      'GET',
      apiPath('policy/v1', 'poddisruptionbudgets', ns, NAME),
    );
    assert.deepEqual([pdb.spec.minAvailable, pdb.spec.maxUnavailable], [1, undefined]);
    const role = async (n: string) =>
      (
        await kubeRequestOk<{ rules?: Array<{ resourceNames?: string[]; verbs: string[] }> }>(
          cluster.kc,
          'GET',
          apiPath('rbac.authorization.k8s.io/v1', 'roles', ns, n),
        )
      ).rules ?? [];
    assert.deepEqual(await role(`${NAME}-atlantis`), [], 'no pod runs as the instance-wide account: its Role grants nothing');
    for (const i of [0, 1])
      assert.deepEqual(
        (await role(`${NAME}-atlantis-${i}`)).map((r) => r.resourceNames),
        [[`${NAME}-${i}`]],
        `pod ${i}'s Role names only its own pod`,
      );
    for (const p of pods)
      assert.equal(
        p.spec?.serviceAccountName,
        `${NAME}-atlantis-${p.metadata!.labels!['atlantis-operator.dev/ordinal']}`,
        'each pod runs as its own account',
      );

    const s = ad.status!;
    assert.equal(s.observedGeneration, ad.metadata.generation);
    assert.equal(s.readyReplicas, 2);
    assert.equal(s.updatedReplicas, 2);
    assert.equal(s.drainingReplicas, 0);
    assert.equal(s.selector, `app.kubernetes.io/name=atlantis,app.kubernetes.io/instance=${NAME}`);
    assert.equal(cond(ad, 'Available')?.status, 'True');
    assert.equal(cond(ad, 'Available')?.reason, 'MinimumReplicasAvailable');
    assert.equal(cond(ad, 'Progressing')?.status, 'True');
    assert.equal(cond(ad, 'Progressing')?.reason, 'RolloutComplete');
    assert.equal(cond(ad, 'Paused')?.status, 'False');
    assert.equal(cond(ad, 'Degraded')?.status, 'False');
    for (const c of s.conditions) assert.equal(c.observedGeneration, ad.metadata.generation, `${c.type}.observedGeneration`);
    assert.deepEqual(
      s.pods.map((p) => [p.name, p.ready, p.revision]),
      [
        [`${NAME}-0`, true, revision0],
        [`${NAME}-1`, true, revision0],
      ],
    );
    // The scale subresource reads the selector from status.
    const scale = await kubeRequestOk<{ status: { replicas: number; selector: string } }>(
      cluster.kc,
      'GET',
      apiPath(API_VERSION, PLURAL, ns, NAME, 'scale'),
    );
    assert.equal(scale.status.selector, s.selector);
    assert.equal(scale.status.replicas, 2);
    assert.ok(
      (await events(cluster.kc, ns)).some((e) => e.reason === 'RolloutComplete'),
      'a RolloutComplete event for the first rollout',
    );
  });

  it('an edit by hand to the Service or a Role is reverted (server-side apply); a steady state applies nothing', {
    timeout: 60_000,
  }, async () => {
    const written = (change: string) => ctrl.logs.filter((l) => l.msg === 'Owned object written' && l.fields.change === change);
    assert.deepEqual(
      written('applied').map((l) => l.fields.name),
      [],
      'nothing re-applied since the objects were created: the cache matched what we render',
    );
    type Svc = {
      metadata: { managedFields?: Array<{ manager: string; operation: string }> };
      spec: { selector: Record<string, string>; ports: Array<{ name?: string; port: number; targetPort: number; protocol?: string }> };
    };
    type Role = { rules?: Array<{ resourceNames?: string[]; verbs: string[] }> };
    const svcPath = apiPath('v1', 'services', ns, NAME);
    const rolePath = apiPath('rbac.authorization.k8s.io/v1', 'roles', ns, `${NAME}-atlantis-0`);
    // Someone points the webhook Service elsewhere and lets pod 0 read its sibling.
    await kubeRequestOk(
      cluster.kc,
      'PATCH',
      svcPath,
      {
        spec: {
          selector: { 'app.kubernetes.io/instance': 'elsewhere' },
          ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }],
        },
      },
      { contentType: MERGE_PATCH },
    );
    await kubeRequestOk(
      cluster.kc,
      'PATCH',
      rolePath,
      { rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'], resourceNames: [`${NAME}-0`, `${NAME}-1`] }] },
      { contentType: MERGE_PATCH },
    );
    const svc = await waitFor(
      'the Service restored',
      async () => {
        const s = await kubeRequestOk<Svc>(cluster.kc, 'GET', svcPath);
        return s.spec.selector['app.kubernetes.io/instance'] === NAME && s.spec.ports.length === 1 && s.spec.ports[0]!.targetPort === 4141
          ? s
          : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(svc.spec.selector, { 'app.kubernetes.io/name': 'atlantis', 'app.kubernetes.io/instance': NAME });
    assert.ok(
      svc.metadata.managedFields?.some((f) => f.manager === 'atlantis-operator' && f.operation === 'Apply'),
      `applied by our field manager: ${JSON.stringify(svc.metadata.managedFields?.map((f) => [f.manager, f.operation]))}`,
    );
    const rules = await waitFor(
      'the Role of pod 0 restored',
      async () => {
        const r = (await kubeRequestOk<Role>(cluster.kc, 'GET', rolePath)).rules ?? [];
        return r.length === 1 && r[0]!.resourceNames?.length === 1 ? r : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(
      rules.map((r) => r.resourceNames),
      [[`${NAME}-0`]],
      'pod 0 reads only its own pod again',
    );
    // The controller logs an apply after the API server answered it, so the restored object can
    // be seen before the line: wait for the controller's own log, not for our GET.
    const reapplied = await waitFor(
      'the controller logged both applies',
      () => {
        const names = written('applied').map((l) => l.fields.name);
        return names.includes(NAME) && names.includes(`${NAME}-atlantis-0`) ? names : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.ok(
      reapplied.every((n) => n === NAME || n === `${NAME}-atlantis-0`),
      `and nothing else: ${JSON.stringify(reapplied)}`,
    );
  });

  it('an idle rollout (changed pod template annotation) replaces pods highest ordinal first, one at a time, keeping PVC data', {
    timeout: 180_000,
  }, async () => {
    const before = await listPods(cluster.kc, ns, NAME);
    const oldUid = new Map(before.map((p) => [p.metadata!.name!, p.metadata!.uid!]));
    const claimUids = { 0: await pvcUid(`${NAME}-data-0`), 1: await pvcUid(`${NAME}-data-1`) };
    for (const i of [0, 1]) fs.writeFileSync(path.join(node.pvDir(ns, `${NAME}-data-${i}`), 'survives-rollout.txt'), `ordinal ${i}\n`);
    const newEvents = await eventsSince(cluster.kc, ns, NAME);

    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    await patchAdSpec(cluster.kc, ns, NAME, {
      podTemplate: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } },
    });
    let ad: AtlantisDeployment;
    let pods: V1Pod[];
    try {
      ad = await waitForAd(
        cluster.kc,
        ns,
        NAME,
        'the restart rollout to complete',
        (a) => a.status!.updateRevision !== revision0 && rolloutComplete(2)(a),
        150_000,
      );
      pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], {
        revision: ad.status!.updateRevision,
        timeoutMs: 30_000,
      });
    } finally {
      await rec.stop();
    }
    const revision1 = ad.status!.updateRevision;
    assert.notEqual(revision1, revision0, 'a changed podTemplate annotation is a new revision');
    for (const p of pods) {
      assert.notEqual(p.metadata!.uid, oldUid.get(p.metadata!.name!), `${p.metadata!.name} was replaced`);
      assert.equal(
        p.metadata!.annotations!['kubectl.kubernetes.io/restartedAt'] !== undefined,
        true,
        'the new pod carries the template annotation',
      );
    }

    const old1 = rec.records.get(oldUid.get(`${NAME}-1`)!);
    const old0 = rec.records.get(oldUid.get(`${NAME}-0`)!);
    const new1 = rec.records.get(pods[1]!.metadata!.uid!);
    assert.ok(old0 && old1 && new1, 'the recorder saw the old pods and the new pod 1');
    const deleted = rec.deletionOrder().map((r) => `${r.name}/${r.revision}`);
    assert.deepEqual(deleted, [`${NAME}-1/${revision0}`, `${NAME}-0/${revision0}`], 'old pods deleted highest ordinal first');
    assert.deepEqual(
      rec.drainOrder().map((r) => r.name),
      [`${NAME}-1`, `${NAME}-0`],
      'drains started highest ordinal first',
    );
    // Watch events come in the cluster's own order, so these are strict.
    assert.ok(
      old1.drainSeen !== undefined && old1.drainSeen < (old1.deletingSeen ?? old1.goneSeen!),
      `${NAME}-1 carried the drain annotation before it was deleted: ${JSON.stringify(old1)}`,
    );
    assert.ok(
      new1.readySeen !== undefined && old0.drainSeen !== undefined && new1.readySeen < old0.drainSeen,
      `one at a time: ${NAME}-0's drain (event ${old0.drainSeen}) started only after the new ${NAME}-1 was Ready (event ${new1.readySeen})`,
    );
    assert.ok(
      rec.maxUnavailable() <= 1,
      `never more than maxUnavailable=1 pod not-ready-or-draining; saw ${rec.maxUnavailable()} (over ${rec.samples()} watch events)`,
    );

    // Same PVCs (not recreated), data still there, mounted by the new pods.
    for (const i of [0, 1] as const) {
      assert.equal(await pvcUid(`${NAME}-data-${i}`), claimUids[i], `PVC ${NAME}-data-${i} kept`);
      assert.equal(claimOf(pods[i]!), `${NAME}-data-${i}`);
      assert.equal(fs.readFileSync(path.join(node.pvDir(ns, `${NAME}-data-${i}`), 'survives-rollout.txt'), 'utf8'), `ordinal ${i}\n`);
    }

    const evs = await newEvents();
    const reasons = evs.map((e) => e.reason);
    for (const r of ['DrainStarted', 'Drained', 'PodReplaced', 'RolloutComplete'])
      assert.ok(reasons.includes(r), `event ${r} recorded; got ${reasons.join(', ')}`);
    assert.equal(reasons.filter((r) => r === 'DrainStarted').length, 2, `one DrainStarted per pod; got ${reasons.join(', ')}`);
    assert.equal(reasons.filter((r) => r === 'PodReplaced').length, 2, `one PodReplaced per pod; got ${reasons.join(', ')}`);
    assert.ok(
      evs.find((e) => e.reason === 'DrainStarted' && e.message.includes(`${NAME}-1`)),
      'DrainStarted names the pod',
    );
    // No process was killed: the drained servers exited on SIGTERM.
    const kills = node.events({ namespace: ns }).filter((e) => e.type === 'SIGKILL sent');
    assert.deepEqual(kills, [], 'no SIGKILL during an idle rollout');
  });

  it('scales 3 -> 1 -> 2: scale-down drains then deletes the highest ordinals, PVCs are kept and reused', {
    timeout: 240_000,
  }, async () => {
    let R = 3;
    await patchAdSpec(cluster.kc, ns, NAME, { replicas: 3 });
    await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`, `${NAME}-2`], { timeoutMs: 120_000 });
    await waitForAd(cluster.kc, ns, NAME, '3 replicas complete', rolloutComplete(3));
    assert.ok(
      (await pvcs()).some((c) => c.metadata!.name === `${NAME}-data-2`),
      'scale-up created the PVC of ordinal 2',
    );
    const pdbMin = async () =>
      (await kubeRequestOk<{ spec: { minAvailable?: number } }>(cluster.kc, 'GET', apiPath('policy/v1', 'poddisruptionbudgets', ns, NAME)))
        .spec.minAvailable;
    await waitFor('the PDB follows replicas', async () => (await pdbMin()) === 2, { timeoutMs: 10_000 });
    const claimUids = new Map(await Promise.all([0, 1, 2].map(async (i) => [i, await pvcUid(`${NAME}-data-${i}`)] as const)));
    fs.writeFileSync(path.join(node.pvDir(ns, `${NAME}-data-1`), 'kept-on-scale-down.txt'), 'one\n');

    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => R });
    R = 1;
    await patchAdSpec(cluster.kc, ns, NAME, { replicas: 1 });
    try {
      await waitForAd(cluster.kc, ns, NAME, 'scale down to 1', rolloutComplete(1), 120_000);
      await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`], { timeoutMs: 30_000 });
    } finally {
      await rec.stop();
    }
    const removed = rec.deletionOrder().map((r) => r.name);
    assert.deepEqual(removed, [`${NAME}-2`, `${NAME}-1`], 'scale-down removes the highest ordinal first');
    // The watch sees every change, however fast an idle server drains: the annotation
    // strictly before the deletion.
    for (const r of rec.deletionOrder())
      assert.ok(
        r.drainSeen !== undefined && r.drainSeen < (r.deletingSeen ?? r.goneSeen!),
        `${r.name} carried the drain annotation before it was deleted; recorded: ${JSON.stringify(r)}`,
      );
    const drained = (await events(cluster.kc, ns)).filter((e) => e.reason === 'Drained').map((e) => e.message);
    for (const n of [`${NAME}-2`, `${NAME}-1`])
      assert.ok(
        drained.some((m) => m.startsWith(`Pod ${n} drained`)),
        `a Drained event for ${n}; got ${JSON.stringify(drained)}`,
      );
    const afterDown = await pvcs();
    assert.deepEqual(
      afterDown.map((c) => c.metadata!.name).sort(),
      [0, 1, 2].map((i) => `${NAME}-data-${i}`),
      'every PVC kept on scale-down',
    );

    // Scale up through the scale subresource, as `kubectl scale` does.
    const sc = await cluster.kubectl(['-n', ns, 'scale', `atd/${NAME}`, '--replicas=2']);
    assert.equal(sc.exitCode, 0, sc.stderr);
    const pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], { timeoutMs: 120_000 });
    await waitForAd(cluster.kc, ns, NAME, 'scale up to 2', rolloutComplete(2));
    assert.equal(claimOf(pods[1]!), `${NAME}-data-1`);
    assert.equal(await pvcUid(`${NAME}-data-1`), claimUids.get(1), `scale-up reuses PVC ${NAME}-data-1 (same UID)`);
    assert.equal(fs.readFileSync(path.join(node.pvDir(ns, `${NAME}-data-1`), 'kept-on-scale-down.txt'), 'utf8'), 'one\n');
    assert.equal(await pvcUid(`${NAME}-data-2`), claimUids.get(2), `PVC ${NAME}-data-2 still kept`);
  });

  it('paused: an image change starts no drain; unpausing rolls it out', { timeout: 240_000 }, async () => {
    // Starts from 2 Ready pods (what the scale step leaves).
    await patchAdSpec(cluster.kc, ns, NAME, { replicas: 2 });
    await waitForAd(cluster.kc, ns, NAME, '2 replicas complete', rolloutComplete(2), 120_000);
    const before = await listPods(cluster.kc, ns, NAME);
    const oldRev = revisionOf(before[0]!);
    await patchAdSpec(cluster.kc, ns, NAME, { paused: true });
    await waitForAd(cluster.kc, ns, NAME, 'Paused=True', (a) => cond(a, 'Paused')?.status === 'True');
    await patchAdSpec(cluster.kc, ns, NAME, { image: 'atlantis-operator:v2' });
    const paused = await waitForAd(
      cluster.kc,
      ns,
      NAME,
      'the image change observed while paused',
      (a) => a.status!.updateRevision !== oldRev,
    );
    assert.equal(cond(paused, 'Paused')?.status, 'True');
    assert.equal(cond(paused, 'Paused')?.reason, 'Paused');
    assert.equal(cond(paused, 'Progressing')?.reason, 'RolloutPaused');

    // Give the controller time to (wrongly) act: nothing may change.
    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    await sleep(8_000);
    await rec.stop();
    const now = await listPods(cluster.kc, ns, NAME);
    assert.deepEqual(
      now.map((p) => p.metadata!.uid),
      before.map((p) => p.metadata!.uid),
      'no pod replaced while paused',
    );
    assert.deepEqual(rec.drainOrder(), [], 'no drain started while paused');
    for (const p of now) {
      assert.equal(p.metadata?.annotations?.[DRAIN], undefined, `${p.metadata!.name} has no drain annotation`);
      assert.equal(revisionOf(p), oldRev, `${p.metadata!.name} keeps the old revision`);
    }
    const stillPaused = await getAd(cluster.kc, ns, NAME);
    assert.equal(stillPaused.status!.updatedReplicas, 0);
    assert.equal(stillPaused.status!.readyReplicas, 2);

    await patchAdSpec(cluster.kc, ns, NAME, { paused: false });
    const done = await waitForAd(
      cluster.kc,
      ns,
      NAME,
      'the rollout after unpausing',
      (a) => cond(a, 'Paused')?.status === 'False' && rolloutComplete(2)(a),
      150_000,
    );
    const pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], {
      revision: done.status!.updateRevision,
      timeoutMs: 30_000,
    });
    for (const p of pods) assert.equal(p.spec!.containers[0]!.image, 'atlantis-operator:v2');
  });

  it('deleting the AtlantisDeployment: the garbage collector removes what it owned, no server keeps running', {
    timeout: 180_000,
  }, async () => {
    const pods = await listPods(cluster.kc, ns, NAME);
    assert.equal(pods.length, 2, describePods(pods));
    const ips = pods.map((p) => p.status!.podIP!);
    for (const ip of ips) assert.ok(await serverStatus(ip), `${ip} answers before the delete`);
    const claimNames = (await pvcs()).map((c) => c.metadata!.name!);
    assert.equal(claimNames.length, 3);

    const del = await kubeRequest(cluster.kc, 'DELETE', apiPath(API_VERSION, PLURAL, ns, NAME));
    assert.ok(del.status === 200 || del.status === 202, `DELETE: ${del.status}`);
    await waitFor(
      'the AtlantisDeployment gone',
      async () => (await kubeRequest(cluster.kc, 'GET', apiPath(API_VERSION, PLURAL, ns, NAME))).status === 404,
      { timeoutMs: 60_000 },
    );

    const remaining = async (): Promise<string[]> => {
      const left: string[] = [];
      for (const p of await listPods(cluster.kc, ns, NAME)) left.push(`Pod ${p.metadata!.name}`);
      for (const c of claimNames)
        if ((await kubeRequest(cluster.kc, 'GET', apiPath('v1', 'persistentvolumeclaims', ns, c))).status !== 404) left.push(`PVC ${c}`);
      for (const o of OWNED)
        if ((await kubeRequest(cluster.kc, 'GET', apiPath(o.apiVersion, o.plural, ns, o.name))).status !== 404)
          left.push(`${o.what} ${o.name}`);
      return left;
    };
    let left: string[] = [];
    try {
      await waitFor(
        'the garbage collector to delete every owned object',
        async () => {
          left = await remaining();
          return left.length === 0;
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}; still present: ${left.join(', ')}`);
    }

    // Nothing keeps running: every server process exited and the pod IPs stop answering.
    await waitFor(
      'every server process of the deleted pods to exit',
      () =>
        pods.every((p) =>
          node.events({ namespace: ns, pod: p.metadata!.name! }).some((e) => e.uid === p.metadata!.uid && e.type === 'ContainerExited'),
        ),
      { timeoutMs: 60_000 },
    );
    for (const ip of ips) assert.equal(await serverStatus(ip), undefined, `${ip}:4141 no longer answers`);
    for (const p of pods) {
      const pid = serverPid(p);
      assert.ok(pid);
      assert.equal(
        fs.existsSync(`/proc/${pid}`) && !fs.readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z '),
        false,
        `server process ${pid} of ${p.metadata!.name} is gone`,
      );
    }
  });
});
