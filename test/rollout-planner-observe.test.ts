// The planner's input: observing V1Pods and informer objects, invariants over any observed state, replacementNeeded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { V1Pod } from '@kubernetes/client-node';
import {
  actionsOf,
  formatTime,
  isAvailable,
  observeDeployment,
  observePod,
  planRollout,
  replacementNeeded,
  type ObservedState,
  type PodObservation,
} from '../src/controller/rollout/index.js';
import type { AtlantisDeployment } from '../src/controller/types.js';
import {
  NOW,
  OLD,
  NEW,
  ago,
  probe,
  DRAINED,
  unreachable,
  pod,
  old,
  draining,
  observed,
  summary,
  REJECTED,
  completeStatus,
} from './support/rollout-planner.js';

test('observePod reads a V1Pod', () => {
  const v1: V1Pod = {
    metadata: {
      name: 'web-2',
      uid: 'u',
      labels: { 'atlantis-operator.dev/ordinal': '2', 'atlantis-operator.dev/revision': NEW },
      annotations: { 'atlantis-operator.dev/drain': '2026-06-01T11:00:00Z' },
      creationTimestamp: ago(100),
      deletionTimestamp: ago(1),
    },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'False' }],
      containerStatuses: [
        { name: 'atlantis', ready: false, restartCount: 3, image: 'x', imageID: '', state: { waiting: { reason: 'CrashLoopBackOff' } } },
      ],
    },
  };
  const o = observePod(v1, DRAINED)!;
  assert.equal(o.ordinal, 2);
  assert.equal(o.revision, NEW);
  assert.equal(o.phase, 'Running');
  assert.equal(o.ready, false);
  assert.equal(o.waitingReason, 'CrashLoopBackOff');
  assert.equal(o.drainAnnotation, '2026-06-01T11:00:00Z');
  assert.deepEqual(o.deletionTimestamp, ago(1));
  assert.equal(o.status, DRAINED);
  assert.equal(observePod({ metadata: { name: 'x', uid: 'u', labels: {} } }), null, 'no ordinal label: not ours');
  const ready = observePod({
    metadata: { name: 'web-0', uid: 'u', labels: { 'atlantis-operator.dev/ordinal': '0' } },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  })!;
  assert.equal(ready.ready, true);
  assert.equal(ready.revision, null);
  assert.equal(ready.unschedulable, false);
  const pending = observePod({
    metadata: { name: 'web-1', uid: 'u', labels: { 'atlantis-operator.dev/ordinal': '1' } },
    status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }] },
  })!;
  assert.equal(pending.unschedulable, true);
  assert.equal(pending.phase, 'Pending');
  assert.equal(isAvailable(ready), true);
});

// Invariants over arbitrary observed states: the safety rules hold whatever the controller sees.
const arbPod = (ordinal: number): fc.Arbitrary<PodObservation> =>
  fc
    .record({
      revision: fc.constantFrom(OLD, NEW),
      phase: fc.constantFrom('Pending', 'Running', 'Running', 'Running', 'Failed') as fc.Arbitrary<PodObservation['phase']>,
      ready: fc.boolean(),
      terminating: fc.boolean(),
      drainAgo: fc.option(fc.integer({ min: 0, max: 10_000 })),
      waitingReason: fc.option(fc.constantFrom('CrashLoopBackOff', 'ImagePullBackOff', 'ContainerCreating')),
      status: fc.option(
        fc.oneof(
          fc.constant(unreachable),
          fc.record({ s: fc.boolean(), n: fc.integer({ min: 0, max: 3 }) }).map((x) => probe(x.s, x.n)),
        ),
      ),
    })
    .map((r) =>
      pod(ordinal, {
        revision: r.revision,
        phase: r.phase,
        ready: r.ready,
        deletionTimestamp: r.terminating ? ago(1) : null,
        drainAnnotation: r.drainAgo === null ? null : formatTime(ago(r.drainAgo)),
        waitingReason: r.waitingReason,
        status: r.status,
      }),
    );

const arbState = fc
  .record({
    replicas: fc.integer({ min: 0, max: 5 }),
    maxUnavailable: fc.integer({ min: 1, max: 3 }),
    paused: fc.boolean(),
    onDrainTimeout: fc.constantFrom('Wait', 'Interrupt') as fc.Arbitrary<'Wait' | 'Interrupt'>,
    present: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
    rejected: fc.boolean(),
  })
  .chain((s) =>
    fc.tuple(...s.present.map((present, i) => (present ? arbPod(i).map((p): PodObservation | null => p) : fc.constant(null)))).map((pods) =>
      observed(
        pods.filter((p): p is PodObservation => p !== null),
        {
          replicas: s.replicas,
          maxUnavailable: s.maxUnavailable,
          paused: s.paused,
          onDrainTimeout: s.onDrainTimeout,
          drainTimeoutSeconds: 3600,
        },
        { replacementRejected: s.rejected ? REJECTED : null },
      ),
    ),
  );

test('invariants hold for any observed state', () => {
  // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
  fc.assert(
    fc.property(arbState, (o) => {
      const plan = planRollout(o, NOW);
      const byName = new Map(o.pods.map((p) => [p.name, p]));
      const drains = actionsOf(plan, 'startDrain');
      // Paused: no new drain.
      if (o.spec.paused) assert.equal(drains.length, 0);
      // Never more than maxUnavailable not-ready-or-draining because of new drains.
      const unavailableBefore = new Set<number>();
      for (let i = 0; i < o.spec.replicas; i++) if (!o.pods.some((p) => p.ordinal === i && isAvailable(p))) unavailableBefore.add(i);
      for (const p of o.pods) if (p.ordinal >= o.spec.replicas && !isAvailable(p)) unavailableBefore.add(p.ordinal);
      const newlyUnavailable = drains.filter((d) => !unavailableBefore.has(d.ordinal)).length;
      if (newlyUnavailable > 0) assert.ok(unavailableBefore.size + newlyUnavailable <= o.spec.maxUnavailable);
      for (const d of actionsOf(plan, 'deletePod')) {
        const p = byName.get(d.podName)!;
        assert.equal(p.deletionTimestamp, null, 'never deletes a terminating pod again');
        assert.equal(d.uid, p.uid);
        const running = p.phase === 'Running' && !(p.waitingReason === 'CrashLoopBackOff' || p.waitingReason === 'ImagePullBackOff');
        if (running) {
          // A running pod is deleted only once drained, or on an Interrupt timeout.
          assert.ok(p.drainAnnotation, 'only drained pods are deleted while running');
          const drained = p.status?.ok === true && p.status.body.shutting_down && p.status.body.in_progress_operations === 0;
          assert.ok(drained || (o.spec.onDrainTimeout === 'Interrupt' && d.reason === 'DrainTimeout'), `${d.podName} ${d.reason}`);
        }
      }
      // Never creates a pod over an existing one, never outside 0..replicas-1.
      for (const c of actionsOf(plan, 'createPod')) {
        assert.ok(c.ordinal < o.spec.replicas);
        assert.ok(!o.pods.some((p) => p.ordinal === c.ordinal));
      }
      // A refused replacement: no pod of a desired ordinal is drained, deleted or created.
      if (o.replacementRejected) {
        assert.deepEqual(
          drains.filter((d) => d.ordinal < o.spec.replicas),
          [],
          'no rollout drain',
        );
        assert.deepEqual(
          actionsOf(plan, 'deletePod').filter((d) => d.replace),
          [],
          'no delete of a pod to be replaced',
        );
        assert.deepEqual(actionsOf(plan, 'createPod'), [], 'no create');
      }
      // A pod is either acted on or explained; never both drained and deleted in one plan.
      const acted = new Set(plan.actions.flatMap((a) => (a.type === 'startDrain' || a.type === 'deletePod' ? [a.podName] : [])));
      assert.equal(acted.size, drains.length + actionsOf(plan, 'deletePod').length);
    }),
    { numRuns: 2000, seed: 42 },
  );
});

test('replacementNeeded: only when some desired ordinal lacks a live pod at the update revision', () => {
  const cases: Array<[string, ObservedState, boolean]> = [
    ['all current and Ready', observed([pod(0), pod(1), pod(2)]), false],
    ['current but not Ready yet (already created)', observed([pod(0), pod(1), pod(2, { phase: 'Pending', ready: false })]), false],
    ['an outdated pod', observed([pod(0), pod(1), old(2)]), true],
    ['a missing ordinal', observed([pod(0), pod(1)]), true],
    ['a hand drain of a current pod', observed([pod(0), pod(1), draining(2, 5, null, { revision: NEW })]), true],
    ['a terminating current pod', observed([pod(0), pod(1), pod(2, { deletionTimestamp: ago(1) })]), true],
    ['a Failed current pod', observed([pod(0), pod(1), pod(2, { phase: 'Failed' })]), true],
    ['only an extra pod to scale down', observed([pod(0), old(1)], { replicas: 1 }), false],
    ['replicas 0', observed([], { replicas: 0 }), false],
  ];
  for (const [what, state, want] of cases) assert.equal(replacementNeeded(state), want, what);
});

test('observeDeployment builds the planner input from informer objects', () => {
  const ad: AtlantisDeployment = {
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    metadata: { name: 'web', namespace: 'infra', uid: 'ad-uid', generation: 4 },
    spec: { image: 'i', replicas: 2, paused: true, updateStrategy: { onDrainTimeout: 'Interrupt' } },
    status: { ...completeStatus(NEW), currentRevision: OLD },
  };
  const mine = (ordinal: number, uid: string): V1Pod => ({
    metadata: {
      name: `web-${ordinal}`,
      uid,
      labels: {
        'app.kubernetes.io/instance': 'web',
        'atlantis-operator.dev/ordinal': String(ordinal),
        'atlantis-operator.dev/revision': NEW,
      },
      ownerReferences: [
        { apiVersion: 'atlantis-operator.dev/v1alpha1', kind: 'AtlantisDeployment', name: 'web', uid: 'ad-uid', controller: true },
      ],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  });
  const foreign: V1Pod = {
    ...mine(2, 'p-foreign'),
    metadata: { ...mine(2, 'p-foreign').metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'x', uid: 'other' }] },
  };
  const otherInstance: V1Pod = {
    ...mine(3, 'p-other'),
    metadata: { ...mine(3, 'p-other').metadata, labels: { 'app.kubernetes.io/instance': 'api', 'atlantis-operator.dev/ordinal': '3' } },
  };
  const o = observeDeployment(
    ad,
    NEW,
    [mine(1, 'p1'), mine(0, 'p0'), foreign, otherInstance],
    [
      { metadata: { name: 'web-data-1' } },
      { metadata: { name: 'web-data-0' } },
      { metadata: { name: 'web-data-x' } },
      { metadata: { name: 'api-data-5' } },
      { metadata: { name: 'web-data-2', deletionTimestamp: NOW } },
    ],
    new Map([['p1', DRAINED]]),
  );
  assert.equal(o.name, 'web');
  assert.equal(o.namespace, 'infra');
  assert.equal(o.generation, 4);
  assert.deepEqual(o.spec, {
    replicas: 2,
    updateRevision: NEW,
    maxUnavailable: 1,
    paused: true,
    drainTimeoutSeconds: 3600,
    onDrainTimeout: 'Interrupt',
  });
  assert.deepEqual(
    o.pods.map((p) => [p.name, p.status === DRAINED]),
    [
      ['web-1', true],
      ['web-0', false],
    ],
  );
  assert.deepEqual(o.pvcOrdinals, [0, 1]);
  assert.equal(o.previousStatus?.currentRevision, OLD);
  const plan = planRollout(o, NOW);
  assert.equal(plan.complete, true);
  assert.deepEqual(summary(plan), []);
});
