// Rollout planner table, part 2: pods not Running, hand drains, scaling, a refused replacement.
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
  REJECTED,
  rejectedState,
  REJECTED_CONDITIONS,
} from './rollout-planner.js';

export const podRows: Row[] = [
  // ---- pods that are not Running
  {
    name: 'outdated Pending pod replaced without draining, even with the budget used',
    state: observed([old(0), old(1, { phase: 'Pending', ready: false }), draining(2, 10, probe(true, 1))]),
    actions: ['deletePod atlantis-1 NotRunning replace'],
    waiting: { 'atlantis-2': ['OperationsInProgress'], 'atlantis-0': HELD },
    check: (p) => assert.equal(actionsOf(p, 'deletePod')[0]!.drainDurationSeconds, null),
  },
  {
    name: 'outdated crash-looping pod (phase Running) replaced without draining',
    state: observed([old(0), old(1), old(2, { ready: false, waitingReason: 'CrashLoopBackOff' })]),
    actions: ['deletePod atlantis-2 NotRunning replace'],
    conditions: { Degraded: 'False/PodsHealthy' },
  },
  {
    name: 'outdated pod with an image pull error replaced without draining',
    state: observed([old(0), old(1), old(2, { phase: 'Pending', ready: false, waitingReason: 'ImagePullBackOff' })]),
    actions: ['deletePod atlantis-2 NotRunning replace'],
  },
  {
    name: 'draining pod that stopped running: deleted at once',
    state: observed([old(0), old(1), draining(2, 10, unreachable, { waitingReason: 'CrashLoopBackOff' })]),
    actions: ['deletePod atlantis-2 NotRunning replace'],
  },
  {
    name: 'Failed pod of the current revision: deleted and recreated',
    state: observed([pod(0), pod(1, { phase: 'Failed', ready: false }), pod(2)]),
    actions: ['deletePod atlantis-1 Failed replace'],
  },
  {
    name: 'new image never starts: old pods keep serving, Degraded',
    state: observed([old(0), old(1), pod(2, { phase: 'Pending', ready: false, waitingReason: 'ImagePullBackOff', createdAt: ago(30) })]),
    actions: [],
    waiting: { 'atlantis-2': ['WaitingForReadiness'], 'atlantis-1': HELD, 'atlantis-0': HELD },
    conditions: { Available: 'True/MinimumReplicasAvailable', Degraded: 'True/PodsFailing', Progressing: 'False/PodsFailing' },
    check: (p) => assert.match(p.status.conditions.find((c) => c.type === 'Degraded')!.message, /atlantis-2: ImagePullBackOff/),
  },
  {
    name: 'new image crash-loops: Degraded',
    state: observed([old(0), old(1), pod(2, { ready: false, waitingReason: 'CrashLoopBackOff' })]),
    actions: [],
    conditions: { Degraded: 'True/PodsFailing' },
  },
  {
    name: 'fixed image after a bad one: the failing pod (now outdated) is replaced at once',
    state: observed([
      old(0),
      old(1),
      old(2, { revision: 'cccccccccc', phase: 'Pending', ready: false, waitingReason: 'ImagePullBackOff' }),
    ]),
    actions: ['deletePod atlantis-2 NotRunning replace'],
  },
  {
    name: 'up-to-date pod stuck Pending past the progress deadline: Degraded',
    state: observed([pod(0), pod(1), pod(2, { phase: 'Pending', ready: false, createdAt: ago(601) })]),
    actions: [],
    waiting: { 'atlantis-2': ['WaitingForReadiness'] },
    conditions: { Degraded: 'True/PodsFailing', Available: 'True/MinimumReplicasAvailable' },
    check: (p) =>
      assert.equal(
        p.status.conditions.find((c) => c.type === 'Degraded')!.message,
        'Pods failing: atlantis-2: not Ready within 600s of creation',
      ),
  },
  {
    name: 'up-to-date pod that cannot be scheduled: Degraded at once, old pods keep serving',
    state: observed([old(0), old(1), pod(2, { phase: 'Pending', ready: false, unschedulable: true, createdAt: ago(5) })]),
    actions: [],
    waiting: { 'atlantis-2': ['WaitingForReadiness'], 'atlantis-1': HELD },
    conditions: { Degraded: 'True/PodsFailing', Progressing: 'False/PodsFailing' },
    check: (p) => assert.match(p.status.conditions.find((c) => c.type === 'Degraded')!.message, /atlantis-2: Unschedulable/),
  },
  {
    name: 'outdated pod stuck Pending (unschedulable): replaced at once, not Degraded',
    state: observed([pod(0), pod(1), old(2, { phase: 'Pending', ready: false, unschedulable: true })]),
    actions: ['deletePod atlantis-2 NotRunning replace'],
    conditions: { Degraded: 'False/PodsHealthy' },
  },
  {
    name: 'up-to-date pod Pending within the deadline: not Degraded',
    state: observed([pod(0), pod(1), pod(2, { phase: 'Pending', ready: false, createdAt: ago(60) })]),
    actions: [],
    conditions: { Degraded: 'False/PodsHealthy', Progressing: 'True/RolloutInProgress' },
  },
  {
    name: 'outdated Running pod that is not Ready: drained (its terraform may run) without using budget',
    state: observed([old(0), old(1, { ready: false }), draining(2, 10, probe(true, 1))]),
    actions: ['startDrain atlantis-1'],
    waiting: { 'atlantis-0': HELD },
  },

  // ---- hand drains
  {
    name: 'hand drain ("now") of an up-to-date pod: stamped, then waited on',
    state: observed([pod(0), pod(1, { drainAnnotation: 'now', ready: false, status: probe(true, 1) }), pod(2)]),
    actions: ['stampDrainStart atlantis-1'],
    waiting: { 'atlantis-1': ['OperationsInProgress'] },
    check: (p) => assert.equal(actionsOf(p, 'stampDrainStart')[0]!.value, '2026-06-01T12:00:00Z'),
  },
  {
    name: 'hand-drained pod, drained: replaced regardless of revision',
    state: observed([
      pod(0),
      pod(1, { drainAnnotation: 'now', drainStartedAtAnnotation: formatTime(ago(20)), ready: false, status: DRAINED }),
      pod(2),
    ]),
    actions: ['deletePod atlantis-1 Drained replace'],
    events: ['Normal Drained atlantis-1', 'Normal PodReplaced atlantis-1'],
  },
  {
    name: 'hand drain timed out (from the stamp), Interrupt',
    state: observed(
      [
        pod(0),
        pod(1, { drainAnnotation: 'true', drainStartedAtAnnotation: formatTime(ago(4000)), ready: false, status: probe(true, 1) }),
        pod(2),
      ],
      {
        onDrainTimeout: 'Interrupt',
      },
    ),
    actions: ['deletePod atlantis-1 DrainTimeout replace'],
  },
  {
    name: 'hand drain of a pod that is not Running: deleted at once, no stamp',
    state: observed([pod(0), pod(1, { drainAnnotation: 'now', phase: 'Pending', ready: false }), pod(2)]),
    actions: ['deletePod atlantis-1 NotRunning replace'],
  },
  {
    name: 'empty drain annotation is no drain',
    state: observed([pod(0), pod(1, { drainAnnotation: '' }), pod(2)], {}, { previousStatus: completeStatus(NEW) }),
    actions: [],
    check: (p) => assert.equal(p.complete, true),
  },

  // ---- scaling
  {
    name: 'scale down 3 -> 1: drain the highest first, PVCs kept',
    state: observed([pod(0), pod(1), pod(2)], { replicas: 1 }),
    actions: ['startDrain atlantis-2'],
    waiting: { 'atlantis-1': HELD },
    check: (p) => {
      assert.equal(p.status.replicas, 3);
      assert.equal(p.complete, false);
    },
  },
  {
    name: 'scale down: drained extra pod deleted, not replaced',
    state: observed([pod(0), pod(1), draining(2, 30, DRAINED, { revision: NEW })], { replicas: 1 }),
    actions: ['deletePod atlantis-2 Drained'],
    events: ['Normal Drained atlantis-2'],
    waiting: { 'atlantis-1': HELD },
  },
  {
    name: 'scale down: a Pending extra pod is deleted at once',
    state: observed([pod(0), pod(1, { phase: 'Pending', ready: false })], { replicas: 1 }),
    actions: ['deletePod atlantis-1 NotRunning'],
  },
  {
    name: 'scale down to 0',
    state: observed([pod(0), pod(1)], { replicas: 0 }),
    actions: ['startDrain atlantis-1'],
    waiting: { 'atlantis-0': HELD },
  },
  {
    name: 'scale down: terminating extra pod, nothing to do',
    state: observed([pod(0), draining(1, 30, DRAINED, { deletionTimestamp: ago(2), revision: NEW })], { replicas: 1 }),
    actions: [],
    waiting: { 'atlantis-1': ['Terminating'] },
  },
  {
    name: 'scale down while paused: running extra pods are not drained',
    state: observed([pod(0), pod(1)], { replicas: 1, paused: true }),
    actions: [],
    waiting: { 'atlantis-1': ['Paused'] },
  },
  {
    name: 'scale up 1 -> 3: the kept PVC is reused, the new ordinal gets one',
    state: observed([pod(0)], {}, { pvcOrdinals: [0, 1] }),
    actions: [`createPod atlantis-1@${NEW}`, 'createPVC atlantis-data-2', `createPod atlantis-2@${NEW}`],
  },
  // ---- the API server refuses pods of the update revision (dry-run create failed)
  {
    name: 'replacement rejected: no outdated pod is drained; Degraded quotes the API server',
    state: rejectedState([old(0), old(1), old(2)], {}, { previousStatus: completeStatus(OLD) }),
    actions: [],
    events: ['Warning ReplacementRejected'],
    waiting: { 'atlantis-2': ['ReplacementRejected'], 'atlantis-1': ['ReplacementRejected'], 'atlantis-0': ['ReplacementRejected'] },
    conditions: REJECTED_CONDITIONS,
    check: (p) => {
      const degraded = p.status.conditions.find((c) => c.type === 'Degraded')!;
      assert.equal(degraded.message, `The API server refuses pods of revision ${NEW}, so no pod is drained or deleted for it: ${REJECTED}`);
      assert.equal(p.status.conditions.find((c) => c.type === 'Progressing')!.message, degraded.message);
      assert.equal(p.complete, false);
      assert.equal(p.status.currentRevision, OLD);
    },
  },
  {
    name: 'replacement rejected, already reported for this revision: no second event',
    state: rejectedState(
      [old(0), old(1), old(2)],
      {},
      {
        previousStatus: {
          ...completeStatus(OLD),
          updateRevision: NEW,
          conditions: completeStatus(OLD).conditions.map((c) =>
            c.type === 'Progressing' ? { ...c, status: 'False' as const, reason: 'ReplacementRejected' } : c,
          ),
        },
      },
    ),
    actions: [],
    events: [],
  },
  {
    name: 'replacement rejected while paused: both guards are named',
    state: rejectedState([old(0), old(1), old(2)], { paused: true }),
    actions: [],
    waiting: { 'atlantis-2': ['Paused', 'ReplacementRejected'] },
    conditions: { Progressing: 'False/ReplacementRejected', Degraded: 'True/ReplacementRejected', Paused: 'True/Paused' },
  },
  {
    name: 'replacement rejected mid-rollout: the drained pod is kept, not deleted',
    state: rejectedState([old(0), old(1), draining(2, 30, DRAINED)]),
    actions: [],
    events: ['Warning ReplacementRejected'],
    waiting: { 'atlantis-2': ['ReplacementRejected'], 'atlantis-1': ['ReplacementRejected', 'HigherOrdinalFirst'] },
    conditions: {
      Available: 'True/MinimumReplicasAvailable',
      Progressing: 'False/ReplacementRejected',
      Degraded: 'True/ReplacementRejected',
    },
    check: (p) => assert.equal(p.status.drainingReplicas, 1),
  },
  {
    name: 'replacement rejected: a drain past its timeout with Interrupt keeps the pod too',
    state: rejectedState([pod(0), pod(1), draining(2, 120, probe(true, 1))], { drainTimeoutSeconds: 60, onDrainTimeout: 'Interrupt' }),
    actions: [],
    waiting: { 'atlantis-2': ['ReplacementRejected'] },
  },
  {
    name: 'replacement rejected: outdated Pending and Failed pods are kept',
    state: rejectedState([pod(0), old(1, { phase: 'Failed', ready: false }), old(2, { phase: 'Pending', ready: false })]),
    actions: [],
    waiting: { 'atlantis-2': ['ReplacementRejected'], 'atlantis-1': ['ReplacementRejected'] },
    conditions: { Degraded: 'True/ReplacementRejected' },
  },
  {
    name: 'replacement rejected: a missing ordinal gets its PVC, not a pod',
    state: rejectedState([pod(0), pod(1)], {}, { pvcOrdinals: [0, 1] }),
    actions: ['createPVC atlantis-data-2'],
    waiting: { 'atlantis-2': ['ReplacementRejected'] },
    conditions: REJECTED_CONDITIONS,
  },
  {
    name: 'replacement rejected: a scale-down drain needs no replacement and goes on',
    state: rejectedState([old(0), old(1)], { replicas: 1 }),
    actions: ['startDrain atlantis-1'],
    waiting: { 'atlantis-0': ['ReplacementRejected', 'HigherOrdinalFirst'] },
  },
  {
    name: 'scale up during a rollout: missing pods count against the budget',
    state: observed([old(0)], { replicas: 2 }),
    actions: [`createPod atlantis-1@${NEW}`],
    waiting: { 'atlantis-0': HELD },
  },
];
