// Each named guard holds a pod back on its own (and the pod moves once its cause is gone),
// and events come from the change of the structured status, never from condition messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  actionsOf,
  GUARD_NAMES,
  planRollout,
  waitingFor,
  type GuardName,
  type ObservedState,
  type Plan,
} from '../src/controller/rollout/index.js';
import type { AtlantisDeploymentStatus } from '../src/controller/types.js';
import {
  NOW,
  DRAINED,
  ago,
  draining,
  events,
  observed,
  old,
  pod,
  probe,
  rejectedState,
  summary,
  unreachable,
} from './support/rollout-planner.js';

interface Alone {
  guard: GuardName;
  pod: string;
  held: ObservedState;
  /** The same state with the guard's cause removed: the pod's step goes ahead. */
  released: ObservedState;
  /** The pod's action once released (an action string of `summary`), or null: it just stops waiting. */
  then: string | null;
}

const ops = probe(true, 1);
const alone: Alone[] = [
  {
    guard: 'Paused',
    pod: 'atlantis-2',
    held: observed([old(0), old(1), old(2)], { paused: true }),
    released: observed([old(0), old(1), old(2)]),
    then: 'startDrain atlantis-2',
  },
  {
    guard: 'ReplacementRejected',
    pod: 'atlantis-2',
    held: rejectedState([pod(0), pod(1), old(2)]),
    released: observed([pod(0), pod(1), old(2)]),
    then: 'startDrain atlantis-2',
  },
  {
    guard: 'MaxUnavailableReached',
    pod: 'atlantis-2',
    held: observed([pod(0, { ready: false, waitingReason: 'CrashLoopBackOff' }), pod(1), old(2)]),
    released: observed([pod(0, { ready: false, waitingReason: 'CrashLoopBackOff' }), pod(1), old(2)], { maxUnavailable: 2 }),
    then: 'startDrain atlantis-2',
  },
  {
    guard: 'HigherOrdinalFirst',
    pod: 'atlantis-1',
    held: observed([old(0), old(1), draining(2, 10, ops)]),
    released: observed([old(0), old(1), draining(2, 10, ops)], { maxUnavailable: 2 }),
    then: 'startDrain atlantis-1',
  },
  {
    guard: 'DrainInProgress',
    pod: 'atlantis-2',
    held: observed([pod(0), pod(1), draining(2, 2, probe(false, 1))]),
    released: observed([pod(0), pod(1), draining(2, 2, DRAINED)]),
    then: 'deletePod atlantis-2 Drained replace',
  },
  {
    guard: 'OperationsInProgress',
    pod: 'atlantis-2',
    held: observed([pod(0), pod(1), draining(2, 10, ops)]),
    released: observed([pod(0), pod(1), draining(2, 10, DRAINED)]),
    then: 'deletePod atlantis-2 Drained replace',
  },
  {
    guard: 'StatusUnreachable',
    pod: 'atlantis-2',
    held: observed([pod(0), pod(1), draining(2, 10, unreachable)]),
    released: observed([pod(0), pod(1), draining(2, 10, DRAINED)]),
    then: 'deletePod atlantis-2 Drained replace',
  },
  {
    guard: 'DrainTimeout',
    pod: 'atlantis-2',
    held: observed([pod(0), pod(1), draining(2, 4000, ops)]),
    released: observed([pod(0), pod(1), draining(2, 4000, ops)], { onDrainTimeout: 'Interrupt' }),
    then: 'deletePod atlantis-2 DrainTimeout replace',
  },
  {
    guard: 'WaitingForReadiness',
    pod: 'atlantis-2',
    held: observed([pod(0), pod(1), pod(2, { ready: false, createdAt: ago(5) })]),
    released: observed([pod(0), pod(1), pod(2)]),
    then: null,
  },
  {
    guard: 'Terminating',
    pod: 'atlantis-2',
    held: observed([pod(0), pod(1), pod(2, { deletionTimestamp: ago(1) })], { replicas: 2 }),
    released: observed([pod(0), pod(1)], { replicas: 2 }),
    then: null,
  },
  {
    guard: 'WaitingForTermination',
    pod: 'atlantis-2',
    held: observed([pod(0), pod(1), old(2, { deletionTimestamp: ago(1), ready: false })]),
    released: observed([pod(0), pod(1)]),
    then: 'createPod atlantis-2@bbbbbbbbbb',
  },
];

const actsOn = (plan: Plan, name: string): string[] =>
  summary(plan).filter((a) => a.endsWith(` ${name}`) || a.includes(` ${name} `) || a.startsWith(`createPod ${name}@`));

test('every guard holds a pod back on its own', async (t) => {
  assert.deepEqual(alone.map((a) => a.guard).sort(), [...GUARD_NAMES].sort(), 'one case per guard');
  for (const a of alone) {
    await t.test(a.guard, () => {
      const held = planRollout(a.held, NOW);
      assert.deepEqual(waitingFor(held, a.pod), [a.guard], 'held by this guard alone');
      assert.deepEqual(actsOn(held, a.pod), [], 'no action on the held pod');
      const released = planRollout(a.released, NOW);
      assert.deepEqual(waitingFor(released, a.pod), [], 'released once its cause is gone');
      assert.deepEqual(actsOn(released, a.pod), a.then === null ? [] : [a.then]);
    });
  }
});

/** The status as written, with every condition message reworded. */
const reworded = (s: AtlantisDeploymentStatus): AtlantisDeploymentStatus => ({
  ...s,
  conditions: s.conditions.map((c) => ({ ...c, message: `reworded: ${c.message.toUpperCase()}` })),
});

test('rewording a condition message fires no event: events come from the structured status', () => {
  const states: Array<{ state: ObservedState; first: string[] }> = [
    { state: observed([old(0), old(1), draining(2, 4000, ops)]), first: ['Warning DrainTimeout atlantis-2'] },
    { state: observed([pod(0), pod(1), pod(2)]), first: ['Normal RolloutComplete'] },
    { state: rejectedState([old(0), old(1), old(2)]), first: ['Warning ReplacementRejected'] },
  ];
  for (const { state, first } of states) {
    const plan = planRollout(state, NOW);
    assert.deepEqual(events(plan), first);
    const later = new Date(NOW.getTime() + 5_000);
    assert.deepEqual(events(planRollout({ ...state, previousStatus: plan.status }, later)), [], 'as written: no event again');
    assert.deepEqual(events(planRollout({ ...state, previousStatus: reworded(plan.status) }, later)), [], 'reworded: no event again');
  }
});

test('a timed-out drain while the replacement is refused: DrainTimeout fires once', () => {
  // ReplacementRejected takes the Progressing condition; the timed-out pod is still known.
  const state = rejectedState([pod(0), pod(1), draining(2, 4000, ops)]);
  const first = planRollout(state, NOW);
  assert.deepEqual(events(first), ['Warning DrainTimeout atlantis-2', 'Warning ReplacementRejected']);
  assert.deepEqual(first.status.timedOutPods, ['atlantis-2']);
  assert.deepEqual(waitingFor(first, 'atlantis-2'), ['ReplacementRejected', 'DrainTimeout']);
  const again = planRollout({ ...state, previousStatus: first.status }, new Date(NOW.getTime() + 5_000));
  assert.deepEqual(events(again), []);
});

test('DrainTimeout fires per pod as it joins timedOutPods', () => {
  const both = observed([pod(0), draining(1, 4000, ops), draining(2, 4000, unreachable)], { maxUnavailable: 2 });
  const first = planRollout(both, NOW);
  assert.deepEqual(first.status.timedOutPods, ['atlantis-2', 'atlantis-1']);
  const prevOne: AtlantisDeploymentStatus = { ...first.status, timedOutPods: ['atlantis-1'] };
  const plan = planRollout({ ...both, previousStatus: prevOne }, NOW);
  const timeouts = actionsOf(plan, 'emitEvent').filter((e) => e.reason === 'DrainTimeout');
  assert.deepEqual(
    timeouts.map((e) => e.podName),
    ['atlantis-2'],
  );
  assert.match(timeouts[0]!.message, /status unreachable \(connect ECONNREFUSED\)/);
  // A status written before the field existed: each timed-out pod is reported once more.
  const { timedOutPods: _, ...legacy } = first.status;
  assert.equal(events(planRollout({ ...both, previousStatus: legacy }, NOW)).filter((e) => e.startsWith('Warning DrainTimeout')).length, 2);
});

test('timedOutPods is empty (not absent) when nothing timed out, so a merge patch clears it', () => {
  const plan = planRollout(observed([pod(0), pod(1), draining(2, 10, ops)]), NOW);
  assert.deepEqual(plan.status.timedOutPods, []);
});
