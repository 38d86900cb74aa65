// The rollout planner, table-driven: every rule of SPEC section 7 and every guard.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { V1Pod } from '@kubernetes/client-node';
import {
  actionsOf,
  formatTime,
  GUARD_NAMES,
  isAvailable,
  observeDeployment,
  observePod,
  planRollout,
  replacementNeeded,
  waitingFor,
  type GuardName,
  type ObservedState,
  type Plan,
  type PodObservation,
  type RolloutSpec,
} from '../src/controller/rollout/index.js';
import type { AtlantisDeployment, AtlantisDeploymentStatus, StatusProbe } from '../src/controller/types.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const OLD = 'aaaaaaaaaa';
const NEW = 'bbbbbbbbbb';
const ago = (s: number): Date => new Date(NOW.getTime() - s * 1000);

const probe = (shutting: boolean, ops: number): StatusProbe => ({ ok: true, at: NOW, body: { shutting_down: shutting, in_progress_operations: ops, version: '1' } });
const DRAINED = probe(true, 0);
const unreachable: StatusProbe = { ok: false, error: 'connect ECONNREFUSED', at: NOW };

function pod(ordinal: number, o: Partial<PodObservation> = {}): PodObservation {
  return {
    ordinal,
    name: `atlantis-${ordinal}`,
    uid: `uid-${ordinal}`,
    revision: NEW,
    phase: 'Running',
    ready: true,
    deletionTimestamp: null,
    drainAnnotation: null,
    drainStartedAtAnnotation: null,
    waitingReason: null,
    createdAt: ago(3600),
    status: null,
    ...o,
  };
}
const old = (ordinal: number, o: Partial<PodObservation> = {}): PodObservation => pod(ordinal, { revision: OLD, ...o });
/** A pod whose drain annotation was set `secondsAgo` (a draining server is not Ready). */
const draining = (ordinal: number, secondsAgo: number, status: StatusProbe | null, o: Partial<PodObservation> = {}): PodObservation =>
  old(ordinal, { drainAnnotation: formatTime(ago(secondsAgo)), ready: false, status, ...o });

function observed(pods: PodObservation[], spec: Partial<RolloutSpec> = {}, extra: Partial<ObservedState> = {}): ObservedState {
  const replicas = spec.replicas ?? 3;
  return {
    name: 'atlantis',
    namespace: 'infra',
    generation: 7,
    spec: { replicas, updateRevision: NEW, maxUnavailable: 1, paused: false, drainTimeoutSeconds: 3600, onDrainTimeout: 'Wait', ...spec },
    pods,
    pvcOrdinals: Array.from({ length: Math.max(replicas, ...pods.map((p) => p.ordinal + 1)) }, (_, i) => i),
    ...extra,
  };
}

/** Actions other than events, as short strings. */
function summary(plan: Plan): string[] {
  return plan.actions.flatMap((a) => {
    switch (a.type) {
      case 'createPVC':
        return [`createPVC ${a.name}`];
      case 'createPod':
        return [`createPod ${a.name}@${a.revision}`];
      case 'startDrain':
        return [`startDrain ${a.podName}`];
      case 'stampDrainStart':
        return [`stampDrainStart ${a.podName}`];
      case 'deletePod':
        return [`deletePod ${a.podName} ${a.reason}${a.replace ? ' replace' : ''}`];
      case 'emitEvent':
        return [];
    }
  });
}
const events = (plan: Plan): string[] => actionsOf(plan, 'emitEvent').map((e) => `${e.eventType} ${e.reason}${e.podName ? ` ${e.podName}` : ''}`);
const cond = (plan: Plan, type: string): string => {
  const c = plan.status.conditions.find((x) => x.type === type);
  return c ? `${c.status}/${c.reason}` : 'missing';
};

interface Row {
  name: string;
  state: ObservedState;
  now?: Date;
  actions: string[];
  waiting?: Record<string, GuardName[]>;
  events?: string[];
  conditions?: Record<string, string>;
  check?: (plan: Plan) => void;
}

const completeStatus = (rev: string): AtlantisDeploymentStatus => ({
  observedGeneration: 6,
  replicas: 3,
  readyReplicas: 3,
  updatedReplicas: 3,
  drainingReplicas: 0,
  currentRevision: rev,
  updateRevision: rev,
  selector: 'app.kubernetes.io/name=atlantis,app.kubernetes.io/instance=atlantis',
  conditions: [
    { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: '', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 6 },
    { type: 'Progressing', status: 'True', reason: 'RolloutComplete', message: '', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 6 },
    { type: 'Paused', status: 'False', reason: 'NotPaused', message: '', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 6 },
    { type: 'Degraded', status: 'False', reason: 'PodsHealthy', message: '', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 6 },
  ],
  pods: [],
});

/** Held by the budget that higher ordinals (rolling out first) hold. */
const HELD: GuardName[] = ['HigherOrdinalFirst'];
/** What the API server answered a dry-run create of a pod with `limits.memory: 2GB`. */
const REJECTED = 'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression \'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$\'';
const rejectedState = (pods: PodObservation[], spec: Partial<RolloutSpec> = {}, extra: Partial<ObservedState> = {}): ObservedState =>
  observed(pods, spec, { replacementRejected: REJECTED, ...extra });
const REJECTED_CONDITIONS = { Available: 'True/MinimumReplicasAvailable', Progressing: 'False/ReplacementRejected', Degraded: 'True/ReplacementRejected' };

const rows: Row[] = [
  // ---- steady state and creation
  {
    name: 'steady state: nothing to do, complete',
    state: observed([pod(0), pod(1), pod(2)], {}, { previousStatus: completeStatus(NEW) }),
    actions: [],
    events: [],
    conditions: { Available: 'True/MinimumReplicasAvailable', Progressing: 'True/RolloutComplete', Paused: 'False/NotPaused', Degraded: 'False/PodsHealthy' },
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
    actions: ['createPVC atlantis-data-0', `createPod atlantis-0@${NEW}`, 'createPVC atlantis-data-1', `createPod atlantis-1@${NEW}`, 'createPVC atlantis-data-2', `createPod atlantis-2@${NEW}`],
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
      assert.deepEqual(p.status.pods.map((x) => x.inProgressOperations), [null, null, 2]);
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
    state: observed([pod(0), pod(1), pod(2)], {}, {
      previousStatus: { ...completeStatus(OLD), conditions: completeStatus(OLD).conditions.map((c) => (c.type === 'Progressing' ? { ...c, reason: 'RolloutInProgress' } : c)) },
    }),
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
    state: observed([old(0), old(1), draining(2, 4000, probe(true, 1))], {}, {
      previousStatus: {
        ...completeStatus(OLD),
        conditions: [{ type: 'Progressing', status: 'False', reason: 'DrainTimeout', message: 'Drains past drainTimeoutSeconds, waiting (onDrainTimeout=Wait): atlantis-2', lastTransitionTime: '2026-06-01T11:00:00Z', observedGeneration: 7 }],
        timedOutPods: ['atlantis-2'],
      },
    }),
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
    state: observed([old(0), old(1), old(2, { revision: 'cccccccccc', phase: 'Pending', ready: false, waitingReason: 'ImagePullBackOff' })]),
    actions: ['deletePod atlantis-2 NotRunning replace'],
  },
  {
    name: 'up-to-date pod stuck Pending past the progress deadline: Degraded',
    state: observed([pod(0), pod(1), pod(2, { phase: 'Pending', ready: false, createdAt: ago(601) })]),
    actions: [],
    waiting: { 'atlantis-2': ['WaitingForReadiness'] },
    conditions: { Degraded: 'True/PodsFailing', Available: 'True/MinimumReplicasAvailable' },
    check: (p) => assert.equal(p.status.conditions.find((c) => c.type === 'Degraded')!.message, 'Pods failing: atlantis-2: not Ready within 600s of creation'),
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
    state: observed([pod(0), pod(1, { drainAnnotation: 'now', drainStartedAtAnnotation: formatTime(ago(20)), ready: false, status: DRAINED }), pod(2)]),
    actions: ['deletePod atlantis-1 Drained replace'],
    events: ['Normal Drained atlantis-1', 'Normal PodReplaced atlantis-1'],
  },
  {
    name: 'hand drain timed out (from the stamp), Interrupt',
    state: observed([pod(0), pod(1, { drainAnnotation: 'true', drainStartedAtAnnotation: formatTime(ago(4000)), ready: false, status: probe(true, 1) }), pod(2)], {
      onDrainTimeout: 'Interrupt',
    }),
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
    state: rejectedState([old(0), old(1), old(2)], {}, {
      previousStatus: { ...completeStatus(OLD), updateRevision: NEW, conditions: completeStatus(OLD).conditions.map((c) => (c.type === 'Progressing' ? { ...c, status: 'False' as const, reason: 'ReplacementRejected' } : c)) },
    }),
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
    conditions: { Available: 'True/MinimumReplicasAvailable', Progressing: 'False/ReplacementRejected', Degraded: 'True/ReplacementRejected' },
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

test('rollout planner table', async (t) => {
  for (const row of rows) {
    await t.test(row.name, () => {
      const plan = planRollout(row.state, row.now ?? NOW);
      assert.deepEqual(summary(plan), row.actions, 'actions');
      if (row.waiting) {
        for (const [name, guards] of Object.entries(row.waiting)) assert.deepEqual(waitingFor(plan, name), guards, `guards of ${name}`);
      }
      if (row.events) assert.deepEqual(events(plan), row.events, 'events');
      for (const [type, want] of Object.entries(row.conditions ?? {})) assert.equal(cond(plan, type), want, `condition ${type}`);
      row.check?.(plan);
    });
  }
});

test('the table exercises every guard, event, delete reason and action', () => {
  const plans = rows.map((r) => planRollout(r.state, r.now ?? NOW));
  const guards = new Set(plans.flatMap((p) => p.waiting.flatMap((w) => w.guards)));
  assert.deepEqual([...guards].sort(), [...GUARD_NAMES].sort());
  const reasons = new Set(plans.flatMap((p) => actionsOf(p, 'emitEvent').map((e) => e.reason)));
  assert.deepEqual([...reasons].sort(), ['DrainStarted', 'DrainTimeout', 'Drained', 'PodReplaced', 'ReplacementRejected', 'RolloutComplete']);
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
  assert.equal(progressing.message, 'Waiting: atlantis-2: OperationsInProgress; atlantis-1: HigherOrdinalFirst; atlantis-0: HigherOrdinalFirst');
  assert.match(plan.waiting.find((w) => w.podName === 'atlantis-0')!.message, /unavailable: atlantis-2/);
});

test('status fields', () => {
  const plan = planRollout(observed([pod(0), draining(1, 60, probe(true, 2)), old(2), old(3, { deletionTimestamp: ago(1), ready: false })], { replicas: 3 }), NOW);
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
  assert.deepEqual(s.conditions.map((c) => c.type), ['Available', 'Progressing', 'Paused', 'Degraded']);
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
      containerStatuses: [{ name: 'atlantis', ready: false, restartCount: 3, image: 'x', imageID: '', state: { waiting: { reason: 'CrashLoopBackOff' } } }],
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
  const ready = observePod({ metadata: { name: 'web-0', uid: 'u', labels: { 'atlantis-operator.dev/ordinal': '0' } }, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } })!;
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
      status: fc.option(fc.oneof(fc.constant(unreachable), fc.record({ s: fc.boolean(), n: fc.integer({ min: 0, max: 3 }) }).map((x) => probe(x.s, x.n)))),
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
        { replicas: s.replicas, maxUnavailable: s.maxUnavailable, paused: s.paused, onDrainTimeout: s.onDrainTimeout, drainTimeoutSeconds: 3600 },
        { replacementRejected: s.rejected ? REJECTED : null },
      ),
    ),
  );

test('invariants hold for any observed state', () => {
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
        assert.deepEqual(drains.filter((d) => d.ordinal < o.spec.replicas), [], 'no rollout drain');
        assert.deepEqual(actionsOf(plan, 'deletePod').filter((d) => d.replace), [], 'no delete of a pod to be replaced');
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
      labels: { 'app.kubernetes.io/instance': 'web', 'atlantis-operator.dev/ordinal': String(ordinal), 'atlantis-operator.dev/revision': NEW },
      ownerReferences: [{ apiVersion: 'atlantis-operator.dev/v1alpha1', kind: 'AtlantisDeployment', name: 'web', uid: 'ad-uid', controller: true }],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  });
  const foreign: V1Pod = { ...mine(2, 'p-foreign'), metadata: { ...mine(2, 'p-foreign').metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'x', uid: 'other' }] } };
  const otherInstance: V1Pod = { ...mine(3, 'p-other'), metadata: { ...mine(3, 'p-other').metadata, labels: { 'app.kubernetes.io/instance': 'api', 'atlantis-operator.dev/ordinal': '3' } } };
  const o = observeDeployment(
    ad,
    NEW,
    [mine(1, 'p1'), mine(0, 'p0'), foreign, otherInstance],
    [{ metadata: { name: 'web-data-1' } }, { metadata: { name: 'web-data-0' } }, { metadata: { name: 'web-data-x' } }, { metadata: { name: 'api-data-5' } }, { metadata: { name: 'web-data-2', deletionTimestamp: NOW } }],
    new Map([['p1', DRAINED]]),
  );
  assert.equal(o.name, 'web');
  assert.equal(o.namespace, 'infra');
  assert.equal(o.generation, 4);
  assert.deepEqual(o.spec, { replicas: 2, updateRevision: NEW, maxUnavailable: 1, paused: true, drainTimeoutSeconds: 3600, onDrainTimeout: 'Interrupt' });
  assert.deepEqual(o.pods.map((p) => [p.name, p.status === DRAINED]), [['web-1', true], ['web-0', false]]);
  assert.deepEqual(o.pvcOrdinals, [0, 1]);
  assert.equal(o.previousStatus?.currentRevision, OLD);
  const plan = planRollout(o, NOW);
  assert.equal(plan.complete, true);
  assert.deepEqual(summary(plan), []);
});
