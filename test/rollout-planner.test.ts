// The rollout planner, table-driven: every rule of SPEC section 7 and every guard.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { actionsOf, GUARD_NAMES, planRollout, waitingFor, type ObservedState } from '../src/controller/rollout/index.js';
import {
  NOW,
  OLD,
  NEW,
  ago,
  probe,
  unreachable,
  pod,
  old,
  draining,
  observed,
  type Row,
  completeStatus,
  checkRow,
} from './support/rollout-planner.js';
import { rolloutRows } from './support/rollout-rows.js';
import { podRows } from './support/rollout-rows-pods.js';

const rows: Row[] = [...rolloutRows, ...podRows];

test('rollout planner table', async (t) => {
  for (const row of rows) {
    await t.test(row.name, () => {
      checkRow(row, planRollout(row.state, row.now ?? NOW), assert);
    });
  }
});

test('the table exercises every guard, event, delete reason and action', () => {
  const plans = rows.map((r) => planRollout(r.state, r.now ?? NOW));
  const guards = new Set(plans.flatMap((p) => p.waiting.flatMap((w) => w.guards)));
  assert.deepEqual([...guards].sort(), [...GUARD_NAMES].sort());
  const reasons = new Set(plans.flatMap((p) => actionsOf(p, 'emitEvent').map((e) => e.reason)));
  assert.deepEqual([...reasons].sort(), [
    'DrainStarted',
    'DrainTimeout',
    'Drained',
    'PodReplaced',
    'ReplacementRejected',
    'RolloutComplete',
  ]);
  const deletes = new Set(plans.flatMap((p) => actionsOf(p, 'deletePod').map((d) => d.reason)));
  assert.deepEqual([...deletes].sort(), ['DrainTimeout', 'Drained', 'Failed', 'NotRunning']);
  const types = new Set(plans.flatMap((p) => p.actions.map((a) => a.type)));
  assert.deepEqual([...types].sort(), ['createPVC', 'createPod', 'deletePod', 'emitEvent', 'stampDrainStart', 'startDrain']);
  const conditions = new Set(plans.flatMap((p) => p.status.conditions.map((c) => `${c.type}/${c.status}/${c.reason}`)));
  for (const c of [
    'Available/True/MinimumReplicasAvailable',
    'Available/False/MinimumReplicasUnavailable',
    'Progressing/True/RolloutComplete',
    'Progressing/True/RolloutInProgress',
    'Progressing/False/DrainTimeout',
    'Progressing/False/PodsFailing',
    'Progressing/Unknown/RolloutPaused',
    'Paused/True/Paused',
    'Paused/False/NotPaused',
    'Degraded/True/PodsFailing',
    'Degraded/False/PodsHealthy',
    'Progressing/False/ReplacementRejected',
    'Degraded/True/ReplacementRejected',
  ])
    assert.ok(conditions.has(c), c);
});

test('the planner says why atlantis-0 waits', () => {
  const plan = planRollout(observed([old(0), old(1), draining(2, 60, probe(true, 2))]), NOW);
  assert.deepEqual(waitingFor(plan, 'atlantis-0'), ['HigherOrdinalFirst']);
  assert.deepEqual(waitingFor(plan, 'atlantis-2'), ['OperationsInProgress']);
  const progressing = plan.status.conditions.find((c) => c.type === 'Progressing')!;
  assert.equal(
    progressing.message,
    'Waiting: atlantis-2: OperationsInProgress; atlantis-1: HigherOrdinalFirst; atlantis-0: HigherOrdinalFirst',
  );
  assert.match(plan.waiting.find((w) => w.podName === 'atlantis-0')!.message, /unavailable: atlantis-2/);
});

test('status fields', () => {
  const plan = planRollout(
    observed([pod(0), draining(1, 60, probe(true, 2)), old(2), old(3, { deletionTimestamp: ago(1), ready: false })], { replicas: 3 }),
    NOW,
  );
  const s = plan.status;
  assert.equal(s.observedGeneration, 7);
  assert.equal(s.replicas, 3, 'terminating pods are not counted');
  assert.equal(s.readyReplicas, 2);
  assert.equal(s.updatedReplicas, 1);
  assert.equal(s.drainingReplicas, 1);
  assert.equal(s.updateRevision, NEW);
  assert.equal(s.currentRevision, OLD);
  assert.equal(s.selector, 'app.kubernetes.io/name=atlantis,app.kubernetes.io/instance=atlantis');
  assert.deepEqual(s.pods, [
    { name: 'atlantis-0', revision: NEW, ready: true, drainingSince: null, inProgressOperations: null },
    { name: 'atlantis-1', revision: OLD, ready: false, drainingSince: '2026-06-01T11:59:00Z', inProgressOperations: 2 },
    { name: 'atlantis-2', revision: OLD, ready: true, drainingSince: null, inProgressOperations: null },
    { name: 'atlantis-3', revision: OLD, ready: false, drainingSince: null, inProgressOperations: null },
  ]);
  for (const c of s.conditions) {
    assert.equal(c.observedGeneration, 7);
    assert.match(c.reason, /^[A-Z][A-Za-z]*$/, 'CamelCase reason');
  }
  assert.deepEqual(
    s.conditions.map((c) => c.type),
    ['Available', 'Progressing', 'Paused', 'Degraded', 'Reconciling', 'Stalled', 'Ready'],
  );
});

test('status is stable while nothing changes: the same observation later gives the same status', () => {
  const rows: ObservedState[] = [
    observed([old(0), old(1), draining(2, 30, probe(true, 2))]),
    observed([old(0), old(1), draining(2, 4000, unreachable)]),
    observed([pod(0), pod(1), pod(2, { phase: 'Pending', ready: false, createdAt: ago(700) })]),
    observed([old(0), old(1), pod(2, { ready: false, waitingReason: 'ImagePullBackOff' })]),
    observed([old(0), old(1), old(2)], { paused: true }),
  ];
  for (const o of rows) {
    const first = planRollout(o, NOW);
    const later = planRollout({ ...o, previousStatus: first.status }, new Date(NOW.getTime() + 7_000));
    assert.deepEqual(later.status, first.status);
  }
});

test('conditions keep lastTransitionTime while unchanged and reset it on change', () => {
  const prev = completeStatus(NEW);
  const same = planRollout(observed([pod(0), pod(1), pod(2)], {}, { previousStatus: prev }), NOW);
  for (const c of same.status.conditions) assert.equal(c.lastTransitionTime, '2026-01-01T00:00:00Z', c.type);
  const paused = planRollout(observed([pod(0), pod(1), pod(2)], { paused: true }, { previousStatus: prev }), NOW);
  const p = paused.status.conditions.find((c) => c.type === 'Paused')!;
  assert.equal(p.status, 'True');
  assert.equal(p.lastTransitionTime, '2026-06-01T12:00:00Z');
  assert.equal(paused.status.conditions.find((c) => c.type === 'Available')!.lastTransitionTime, '2026-01-01T00:00:00Z');
});
