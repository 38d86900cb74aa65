// Rollout planner table, part 1: creation, rollout order and budget, drains, timeouts, pausing.
import assert from 'node:assert/strict';
import { actionsOf, formatTime } from '../../src/controller/rollout/index.js';
import {
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
  type Row,
  completeStatus,
  HELD,
} from './rollout-planner.js';

export const rolloutRows: Row[] = [
  // ---- steady state and creation
  {
    name: 'steady state: nothing to do, complete',
    state: observed([pod(0), pod(1), pod(2)], {}, { previousStatus: completeStatus(NEW) }),
    actions: [],
    events: [],
    conditions: {
      Available: 'True/MinimumReplicasAvailable',
      Progressing: 'True/RolloutComplete',
      Paused: 'False/NotPaused',
      Degraded: 'False/PodsHealthy',
    },
    check: (p) => {
      assert.equal(p.complete, true);
      assert.equal(p.requeueAfterMs, null);
      assert.equal(p.waiting.length, 0);
    },
  },
  {
    name: 'first time complete: RolloutComplete event once',
    state: observed([pod(0), pod(1), pod(2)]),
    actions: [],
    events: ['Normal RolloutComplete'],
  },
  {
    name: 'new deployment: PVC then pod for every ordinal',
    state: observed([], {}, { pvcOrdinals: [] }),
    actions: [
      'createPVC atlantis-data-0',
      `createPod atlantis-0@${NEW}`,
      'createPVC atlantis-data-1',
      `createPod atlantis-1@${NEW}`,
      'createPVC atlantis-data-2',
      `createPod atlantis-2@${NEW}`,
    ],
    conditions: { Available: 'False/MinimumReplicasUnavailable', Progressing: 'True/RolloutInProgress' },
  },
  {
    name: 'missing pod whose PVC exists: pod only, same PVC',
    state: observed([pod(0), pod(2)]),
    actions: [`createPod atlantis-1@${NEW}`],
  },
  {
    name: 'replicas 0, nothing exists: nothing to do, complete',
    state: observed([], { replicas: 0 }, { pvcOrdinals: [] }),
    actions: [],
    conditions: { Available: 'True/MinimumReplicasAvailable', Progressing: 'True/RolloutComplete' },
  },

  // ---- rollout order and budget
  {
    name: 'rollout starts with the highest ordinal; lower ones held',
    state: observed([old(0), old(1), old(2)]),
    actions: ['startDrain atlantis-2'],
    waiting: { 'atlantis-1': HELD, 'atlantis-0': HELD },
    events: ['Normal DrainStarted atlantis-2'],
    conditions: { Progressing: 'True/RolloutInProgress', Available: 'True/MinimumReplicasAvailable' },
    check: (p) => {
      assert.equal(p.requeueAfterMs, 500);
      assert.equal(actionsOf(p, 'startDrain')[0]!.value, '2026-06-01T12:00:00Z');
      assert.equal(actionsOf(p, 'startDrain')[0]!.uid, 'uid-2');
      assert.equal(p.status.drainingReplicas, 1);
    },
  },
  {
    name: 'maxUnavailable 2: two drains at once, the third held',
    state: observed([old(0), old(1), old(2)], { maxUnavailable: 2 }),
    actions: ['startDrain atlantis-2', 'startDrain atlantis-1'],
    waiting: { 'atlantis-0': HELD },
  },
  {
    name: 'maxUnavailable 2 with one drain in progress: one more starts',
    state: observed([old(0), old(1), draining(2, 10, probe(true, 1))], { maxUnavailable: 2 }),
    actions: ['startDrain atlantis-1'],
    waiting: { 'atlantis-2': ['OperationsInProgress'], 'atlantis-0': HELD },
  },
  {
    name: 'maxUnavailable 0 is treated as 1 (never deadlocks)',
    state: observed([old(0), old(1)], { replicas: 2, maxUnavailable: 0 }),
    actions: ['startDrain atlantis-1'],
    waiting: { 'atlantis-0': HELD },
  },
  {
    name: 'a broken up-to-date lower pod holds the budget: the top pod waits on MaxUnavailableReached only',
    state: observed([pod(0, { ready: false, waitingReason: 'CrashLoopBackOff' }), old(1), old(2)]),
    actions: [],
    waiting: { 'atlantis-2': ['MaxUnavailableReached'], 'atlantis-1': ['MaxUnavailableReached'], 'atlantis-0': ['WaitingForReadiness'] },
    conditions: { Degraded: 'True/PodsFailing' },
  },
  {
    name: 'a pod without a revision label is outdated',
    state: observed([pod(0), pod(1), pod(2, { revision: null })]),
    actions: ['startDrain atlantis-2'],
  },

  // ---- drain progress
  {
    name: 'drain: /status unreachable on a Running pod is waited on',
    state: observed([old(0), old(1), draining(2, 30, unreachable)]),
    actions: [],
    waiting: { 'atlantis-2': ['StatusUnreachable'], 'atlantis-1': HELD, 'atlantis-0': HELD },
    check: (p) => assert.match(p.waiting[0]!.message, /ECONNREFUSED/),
  },
  {
    name: 'drain: not polled yet counts as unreachable',
    state: observed([old(0), old(1), draining(2, 1, null)]),
    actions: [],
    waiting: { 'atlantis-2': ['StatusUnreachable'] },
  },
  {
    name: 'drain: server has not picked up the annotation yet',
    state: observed([old(0), old(1), draining(2, 2, probe(false, 1))]),
    actions: [],
    waiting: { 'atlantis-2': ['DrainInProgress'] },
  },
  {
    name: 'drain: shutting down with operations in progress',
    state: observed([old(0), old(1), draining(2, 600, probe(true, 2))]),
    actions: [],
    waiting: { 'atlantis-2': ['OperationsInProgress'], 'atlantis-1': HELD, 'atlantis-0': HELD },
    check: (p) => {
      assert.equal(p.requeueAfterMs, 500);
      assert.deepEqual(
        p.status.pods.map((x) => x.inProgressOperations),
        [null, null, 2],
      );
      assert.equal(p.status.pods[2]!.drainingSince, formatTime(ago(600)));
    },
  },
  {
    name: 'drain: zero operations but not shutting down is not drained',
    state: observed([old(0), old(1), draining(2, 5, probe(false, 0))]),
    actions: [],
    waiting: { 'atlantis-2': ['DrainInProgress'] },
  },
  {
    name: 'drained: delete with the UID, Drained + PodReplaced events',
    state: observed([old(0), old(1), draining(2, 30, DRAINED)]),
    actions: ['deletePod atlantis-2 Drained replace'],
    events: ['Normal Drained atlantis-2', 'Normal PodReplaced atlantis-2'],
    waiting: { 'atlantis-1': HELD, 'atlantis-0': HELD },
    check: (p) => {
      const d = actionsOf(p, 'deletePod')[0]!;
      assert.equal(d.uid, 'uid-2');
      assert.equal(d.drainDurationSeconds, 30);
    },
  },
  {
    name: 'deleted pod still terminating: no replacement yet, counts as unavailable',
    state: observed([old(0), old(1), draining(2, 40, DRAINED, { deletionTimestamp: ago(1) })]),
    actions: [],
    waiting: { 'atlantis-2': ['WaitingForTermination'], 'atlantis-1': HELD, 'atlantis-0': HELD },
  },
  {
    name: 'old pod gone: recreated on the same ordinal and PVC at the new revision',
    state: observed([old(0), old(1)]),
    actions: [`createPod atlantis-2@${NEW}`],
    waiting: { 'atlantis-1': HELD, 'atlantis-0': HELD },
  },
  {
    name: 'replacement not Ready yet: the next waits',
    state: observed([old(0), old(1), pod(2, { ready: false, createdAt: ago(5) })]),
    actions: [],
    waiting: { 'atlantis-2': ['WaitingForReadiness'], 'atlantis-1': HELD, 'atlantis-0': HELD },
    check: (p) => assert.equal(p.requeueAfterMs, 595_000, 'requeue at the progress deadline'),
  },
  {
    name: 'replacement Ready: the next ordinal drains',
    state: observed([old(0), old(1), pod(2)]),
    actions: ['startDrain atlantis-1'],
    waiting: { 'atlantis-0': HELD },
    check: (p) => {
      assert.equal(p.status.updatedReplicas, 1);
      assert.equal(p.status.currentRevision, OLD);
      assert.equal(p.status.updateRevision, NEW);
    },
  },
  {
    name: 'restarted controller, half-done rollout: continues the drain, starts nothing new',
    state: observed([old(0), draining(1, 300, probe(true, 1)), pod(2)]),
    actions: [],
    waiting: { 'atlantis-1': ['OperationsInProgress'], 'atlantis-0': HELD },
  },
  {
    name: 'restarted controller, the drain finished while it was down: delete',
    state: observed([old(0), draining(1, 900, DRAINED), pod(2)]),
    actions: ['deletePod atlantis-1 Drained replace'],
  },
  {
    name: 'last pod drained',
    state: observed([draining(0, 20, DRAINED), pod(1), pod(2)]),
    actions: ['deletePod atlantis-0 Drained replace'],
  },
  {
    name: 'rollout finished: RolloutComplete when the previous status was in progress',
    state: observed(
      [pod(0), pod(1), pod(2)],
      {},
      {
        previousStatus: {
          ...completeStatus(OLD),
          conditions: completeStatus(OLD).conditions.map((c) => (c.type === 'Progressing' ? { ...c, reason: 'RolloutInProgress' } : c)),
        },
      },
    ),
    actions: [],
    events: ['Normal RolloutComplete'],
    check: (p) => assert.equal(p.status.currentRevision, NEW),
  },

  // ---- drain timeout
  {
    name: 'timeout, Wait: keeps waiting, Progressing=False DrainTimeout, Warning event',
    state: observed([old(0), old(1), draining(2, 3601, probe(true, 1))]),
    actions: [],
    waiting: { 'atlantis-2': ['DrainTimeout'], 'atlantis-1': HELD, 'atlantis-0': HELD },
    events: ['Warning DrainTimeout atlantis-2'],
    conditions: { Progressing: 'False/DrainTimeout' },
    check: (p) => {
      assert.equal(p.requeueAfterMs, 500, 'keeps polling: the drain may still finish');
      assert.deepEqual(p.status.timedOutPods, ['atlantis-2']);
      assert.match(p.waiting[0]!.message, /1 operation\(s\) in progress/, 'the wait still says what the server reports');
    },
  },
  {
    name: 'timeout, Wait, already reported: no second event',
    state: observed(
      [old(0), old(1), draining(2, 4000, probe(true, 1))],
      {},
      {
        previousStatus: {
          ...completeStatus(OLD),
          conditions: [
            {
              type: 'Progressing',
              status: 'False',
              reason: 'DrainTimeout',
              message: 'Drains past drainTimeoutSeconds, waiting (onDrainTimeout=Wait): atlantis-2',
              lastTransitionTime: '2026-06-01T11:00:00Z',
              observedGeneration: 7,
            },
          ],
          timedOutPods: ['atlantis-2'],
        },
      },
    ),
    actions: [],
    events: [],
    conditions: { Progressing: 'False/DrainTimeout' },
    check: (p) => assert.equal(p.status.conditions.find((c) => c.type === 'Progressing')!.lastTransitionTime, '2026-06-01T11:00:00Z'),
  },
  {
    name: 'timeout, Wait, finally drained: deleted',
    state: observed([old(0), old(1), draining(2, 9000, DRAINED)]),
    actions: ['deletePod atlantis-2 Drained replace'],
  },
  {
    name: 'timeout, Interrupt: delete (the server interrupts terraform)',
    state: observed([old(0), old(1), draining(2, 3600, probe(true, 1))], { onDrainTimeout: 'Interrupt' }),
    actions: ['deletePod atlantis-2 DrainTimeout replace'],
    events: ['Warning DrainTimeout atlantis-2', 'Normal PodReplaced atlantis-2'],
    check: (p) => assert.equal(actionsOf(p, 'deletePod')[0]!.drainDurationSeconds, 3600),
  },
  {
    name: 'timeout, Interrupt, /status unreachable: delete',
    state: observed([old(0), old(1), draining(2, 100, unreachable)], { onDrainTimeout: 'Interrupt', drainTimeoutSeconds: 60 }),
    actions: ['deletePod atlantis-2 DrainTimeout replace'],
  },
  {
    name: 'before the timeout, Interrupt: still waits, requeue at the deadline when sooner than the poll',
    state: observed([old(0), old(1), draining(2, 59, probe(true, 1))], { onDrainTimeout: 'Interrupt', drainTimeoutSeconds: 59.2 }),
    actions: [],
    waiting: { 'atlantis-2': ['OperationsInProgress'] },
    check: (p) => assert.equal(p.requeueAfterMs, 200),
  },
  {
    name: 'drainTimeoutSeconds 0 = no timeout',
    state: observed([old(0), old(1), draining(2, 1e7, probe(true, 3))], { onDrainTimeout: 'Interrupt', drainTimeoutSeconds: 0 }),
    actions: [],
    waiting: { 'atlantis-2': ['OperationsInProgress'] },
  },

  // ---- paused
  {
    name: 'paused: no new drain',
    state: observed([old(0), old(1), old(2)], { paused: true }),
    actions: [],
    waiting: { 'atlantis-2': ['Paused'], 'atlantis-1': ['Paused'], 'atlantis-0': ['Paused'] },
    conditions: { Paused: 'True/Paused', Progressing: 'Unknown/RolloutPaused' },
  },
  {
    name: 'paused: a drain already started continues and completes',
    state: observed([old(0), old(1), draining(2, 30, DRAINED)], { paused: true }),
    actions: ['deletePod atlantis-2 Drained replace'],
    waiting: { 'atlantis-1': ['Paused', ...HELD], 'atlantis-0': ['Paused', ...HELD] },
  },
  {
    name: 'paused: missing pods are still created',
    state: observed([old(0), old(1)], { paused: true }),
    actions: [`createPod atlantis-2@${NEW}`],
  },
  {
    name: 'paused: an outdated pod that is not Running is not replaced',
    state: observed([old(0), old(1), old(2, { phase: 'Pending', ready: false })], { paused: true }),
    actions: [],
    waiting: { 'atlantis-2': ['Paused'] },
  },
  {
    name: 'paused: a Failed pod is still recreated',
    state: observed([pod(0), pod(1), pod(2, { phase: 'Failed', ready: false })], { paused: true }),
    actions: ['deletePod atlantis-2 Failed replace'],
  },
];
