// Fixtures and table rows of the surge rollout (maxSurge > 0, pods without a PVC, named
// `<name>-<ordinal>-<revision>`), on top of the planner's fixtures.
import assert from 'node:assert/strict';
import { actionsOf, formatTime, type ObservedState, type PodObservation, type RolloutSpec } from '../../src/controller/rollout/index.js';
import type { StatusProbe } from '../../src/controller/types.js';
import { DRAINED, NEW, OLD, REJECTED, type Row, ago, observed, pod, probe } from './rollout-planner.js';

/** A third revision, for a rollout changed again mid-way. */
export const MID = 'cccccccccc';
/** The name of ordinal i's pod at a revision (default: the update revision). */
export const N = (i: number, rev: string = NEW): string => `atlantis-${i}-${rev}`;
/** The name of ordinal i's pod at the old revision. */
export const O = (i: number): string => N(i, OLD);

export const at = (ordinal: number, rev: string, o: Partial<PodObservation> = {}): PodObservation =>
  pod(ordinal, { name: N(ordinal, rev), uid: `uid-${ordinal}-${rev}`, revision: rev, ...o });
export const cur = (ordinal: number, o: Partial<PodObservation> = {}): PodObservation => at(ordinal, NEW, o);
export const prev = (ordinal: number, o: Partial<PodObservation> = {}): PodObservation => at(ordinal, OLD, o);
export const drainingAt = (
  ordinal: number,
  rev: string,
  secondsAgo: number,
  status: StatusProbe | null,
  o: Partial<PodObservation> = {},
): PodObservation => at(ordinal, rev, { drainAnnotation: formatTime(ago(secondsAgo)), ready: false, status, ...o });
/** A new pod created `s` seconds ago, not Ready yet. */
export const starting = (ordinal: number, s = 5, o: Partial<PodObservation> = {}): PodObservation =>
  cur(ordinal, { ready: false, createdAt: ago(s), ...o });

/** Redis mode: maxSurge 1 unless given, no PVCs. */
export function surgeState(pods: PodObservation[], spec: Partial<RolloutSpec> = {}, extra: Partial<ObservedState> = {}): ObservedState {
  return observed(pods, { maxSurge: 1, dataClaims: false, ...spec }, { pvcOrdinals: [], ...extra });
}

const ops = probe(true, 1);
const phase = (want: string) => (p: { status: { rolloutPhase?: string } }) => assert.equal(p.status.rolloutPhase, want, 'rolloutPhase');

export const surgeRows: Row[] = [
  {
    name: 'steady state: one pod per ordinal, complete',
    state: surgeState([cur(0), cur(1), cur(2)]),
    actions: [],
    events: ['Normal RolloutComplete'],
    check: (p) => {
      assert.equal(p.complete, true);
      assert.equal(p.status.surgeReplicas, 0);
      phase('Complete')(p);
    },
  },
  {
    name: 'new deployment: pods named by revision, no PVC, no surge event',
    state: surgeState([]),
    actions: [`createPod ${N(0)}@${NEW}`, `createPod ${N(1)}@${NEW}`, `createPod ${N(2)}@${NEW}`],
    events: [],
    check: phase('Updating'),
  },
  {
    name: 'rollout starts: the top ordinal gets its new pod beside the old one; the old ones wait',
    state: surgeState([prev(0), prev(1), prev(2)]),
    actions: [`createPod ${N(2)}@${NEW}`],
    events: [`Normal SurgePodCreated ${N(2)}`],
    waiting: { [O(2)]: ['ReplacementNotReady'], [O(1)]: ['MaxSurgeReached'], [O(0)]: ['MaxSurgeReached'] },
    conditions: { Available: 'True/MinimumReplicasAvailable', Progressing: 'True/RolloutInProgress' },
    check: (p) => {
      assert.equal(actionsOf(p, 'createPod')[0]!.surge, true);
      assert.match(actionsOf(p, 'emitEvent')[0]!.message, new RegExp(`beside ${O(2)}, which drain once ${N(2)} is Ready`));
      assert.match(p.waiting.find((w) => w.podName === O(1))!.message, new RegExp(`4 pod\\(s\\) live .*: ${N(1)} waits for room`));
      assert.equal(p.status.surgeReplicas, 0, 'counted once the cache shows it');
      phase('Surging')(p);
    },
  },
  {
    name: 'new pod not Ready: nothing drains',
    state: surgeState([prev(0), prev(1), prev(2), starting(2)]),
    actions: [],
    waiting: { [O(2)]: ['ReplacementNotReady'], [N(2)]: ['WaitingForReadiness'], [O(1)]: ['MaxSurgeReached'] },
    check: (p) => {
      assert.equal(p.status.surgeReplicas, 1);
      assert.equal(p.status.replicas, 4);
      assert.equal(p.status.updatedReplicas, 1);
      assert.match(p.waiting.find((w) => w.podName === O(2))!.message, new RegExp(`its replacement ${N(2)} is not Ready`));
      phase('Surging')(p);
    },
  },
  {
    name: 'new pod Ready: the old pod of its ordinal drains',
    state: surgeState([prev(0), prev(1), prev(2), cur(2)]),
    actions: [`startDrain ${O(2)}`],
    events: [`Normal DrainStarted ${O(2)}`],
    waiting: { [O(1)]: ['MaxSurgeReached'], [O(0)]: ['MaxSurgeReached'] },
    check: (p) => {
      assert.match(actionsOf(p, 'emitEvent')[0]!.message, new RegExp(`replaced by ${N(2)}`));
      phase('Draining')(p);
    },
  },
  {
    name: 'a drain beside a Ready new pod costs no budget: it goes while another ordinal is unavailable',
    state: surgeState([starting(0), prev(2), cur(2), cur(1)], {}),
    actions: [`startDrain ${O(2)}`],
    waiting: { [N(0)]: ['WaitingForReadiness'] },
    conditions: { Available: 'True/MinimumReplicasAvailable' },
  },
  {
    name: 'old pod draining with an operation: waits; the others wait for room',
    state: surgeState([prev(0), prev(1), drainingAt(2, OLD, 30, ops), cur(2)]),
    actions: [],
    waiting: { [O(2)]: ['OperationsInProgress'], [O(1)]: ['MaxSurgeReached'] },
    check: (p) => {
      assert.equal(p.status.drainingReplicas, 1);
      assert.equal(p.status.surgeReplicas, 1);
      phase('Draining')(p);
    },
  },
  {
    name: 'old pod drained: deleted, not recreated (its new pod replaces it)',
    state: surgeState([prev(0), prev(1), drainingAt(2, OLD, 30, DRAINED), cur(2)]),
    actions: [`deletePod ${O(2)} Drained`],
    events: [`Normal Drained ${O(2)}`, `Normal PodReplaced ${O(2)}`],
    waiting: { [O(1)]: ['MaxSurgeReached'] },
    check: (p) => assert.match(actionsOf(p, 'emitEvent')[1]!.message, new RegExp(`: ${N(2)} replaces it$`)),
  },
  {
    name: 'old pod drained but still Ready (its probe has not failed yet): kept until it leaves the Service',
    state: surgeState([prev(0), prev(1), drainingAt(2, OLD, 3, DRAINED, { ready: true }), cur(2)]),
    actions: [],
    waiting: { [O(2)]: ['LeavingService'], [O(1)]: ['MaxSurgeReached'] },
    check: (p) => {
      assert.match(p.waiting.find((w) => w.podName === O(2))!.message, /drained but still Ready/);
      assert.ok(p.requeueAfterMs !== null && p.requeueAfterMs <= 12_000, `woken by the wait's end at the latest: ${p.requeueAfterMs}`);
      phase('Draining')(p);
    },
  },
  {
    name: 'old pod drained and Ready past the wait (it stays Ready on purpose): deleted',
    state: surgeState([prev(0), prev(1), drainingAt(2, OLD, 16, DRAINED, { ready: true }), cur(2)]),
    actions: [`deletePod ${O(2)} Drained`],
    events: [`Normal Drained ${O(2)}`, `Normal PodReplaced ${O(2)}`],
    waiting: { [O(1)]: ['MaxSurgeReached'] },
  },
  {
    name: 'old pod terminating: it no longer counts, the next ordinal surges',
    state: surgeState([prev(0), prev(1), drainingAt(2, OLD, 40, DRAINED, { deletionTimestamp: ago(1) }), cur(2)]),
    actions: [`createPod ${N(1)}@${NEW}`],
    events: [`Normal SurgePodCreated ${N(1)}`],
    waiting: { [O(2)]: ['Terminating'], [O(1)]: ['ReplacementNotReady'], [O(0)]: ['MaxSurgeReached'] },
    check: phase('Draining'),
  },
  {
    name: 'maxSurge 2: two ordinals surge at once',
    state: surgeState([prev(0), prev(1), prev(2)], { maxSurge: 2 }),
    actions: [`createPod ${N(2)}@${NEW}`, `createPod ${N(1)}@${NEW}`],
    waiting: { [O(2)]: ['ReplacementNotReady'], [O(1)]: ['ReplacementNotReady'], [O(0)]: ['MaxSurgeReached'] },
  },
  {
    name: 'last ordinal: drained old pod deleted, rollout done once gone',
    state: surgeState([cur(0), drainingAt(0, OLD, 20, DRAINED), cur(1), cur(2)]),
    actions: [`deletePod ${O(0)} Drained`],
  },
  {
    name: 'paused: no surge pod is created, no drain starts',
    state: surgeState([prev(0), prev(1), prev(2)], { paused: true }),
    actions: [],
    waiting: { [O(2)]: ['Paused'], [O(1)]: ['Paused'], [O(0)]: ['Paused'] },
    check: phase('Paused'),
  },
  {
    name: 'paused with a Ready new pod: the old one is not drained',
    state: surgeState([prev(0), prev(1), prev(2), cur(2)], { paused: true }),
    actions: [],
    waiting: { [O(2)]: ['Paused'] },
  },
  {
    name: 'paused: an ordinal with no pod is still filled',
    state: surgeState([prev(0), prev(1)], { paused: true }),
    actions: [`createPod ${N(2)}@${NEW}`],
    events: [],
  },
  {
    name: 'a refused revision: no pod created, nothing drained',
    state: surgeState([prev(0), prev(1)], {}, { replacementRejected: REJECTED }),
    actions: [],
    waiting: { [O(1)]: ['ReplacementRejected'], [N(2)]: ['ReplacementRejected'] },
    conditions: { Progressing: 'False/ReplacementRejected' },
    check: phase('Stalled'),
  },
  {
    name: 'an ordinal without pods is filled even with the surge in use',
    state: surgeState([prev(0), prev(1), cur(1, { ready: false, createdAt: ago(5) })]),
    actions: [`createPod ${N(2)}@${NEW}`],
    waiting: { [O(1)]: ['ReplacementNotReady'], [O(0)]: ['MaxSurgeReached'] },
  },
  {
    name: 'an outdated pod that is not Running: deleted at once, its new pod created beside it',
    state: surgeState([prev(0), prev(1), prev(2, { phase: 'Pending', ready: false })]),
    actions: [`deletePod ${O(2)} NotRunning`, `createPod ${N(2)}@${NEW}`],
    waiting: { [O(1)]: ['MaxSurgeReached'] },
  },
  {
    name: 'a hand drain of an up-to-date pod: its namesake waits until it is gone',
    state: surgeState([cur(0), drainingAt(1, NEW, 10, ops), cur(2)]),
    actions: [],
    waiting: { [N(1)]: ['OperationsInProgress'] },
  },
  {
    name: 'the hand-drained pod deleted: recreated once gone',
    state: surgeState([cur(0), drainingAt(1, NEW, 10, DRAINED, { deletionTimestamp: ago(1) }), cur(2)]),
    actions: [],
    waiting: { [N(1)]: ['WaitingForTermination'] },
  },
  {
    name: 'changed back mid-rollout: the wanted pod of an ordinal is still draining, its namesake waits',
    state: surgeState([at(0, MID), at(1, MID), drainingAt(1, NEW, 10, ops)], { replicas: 2, maxSurge: 2 }),
    actions: [`createPod ${N(0)}@${NEW}`],
    waiting: { [N(0, MID)]: ['ReplacementNotReady'], [N(1, MID)]: ['WaitingForSurgePod'], [N(1)]: ['OperationsInProgress'] },
  },
  {
    name: 'two up-to-date pods of one ordinal: the surplus one drains (the expected name stays)',
    state: surgeState([cur(0), pod(1), cur(1), cur(2)]),
    actions: ['startDrain atlantis-1'],
    check: (p) => assert.match(actionsOf(p, 'emitEvent')[0]!.message, new RegExp(`${N(1)} is the up-to-date pod of ordinal 1`)),
  },
  {
    name: 'scale down: extra ordinals drain within the budget as before',
    state: surgeState([cur(0), cur(1), cur(2)], { replicas: 2 }),
    actions: [`startDrain ${N(2)}`],
    check: phase('Draining'),
  },
  {
    name: 'scale down held by the budget: the extra pod waits',
    state: surgeState([starting(0), cur(1), cur(2)], { replicas: 2 }),
    actions: [],
    waiting: { [N(2)]: ['MaxUnavailableReached'], [N(0)]: ['WaitingForReadiness'] },
    check: phase('ScalingDown'),
  },
  {
    name: 'scale down during a rollout: the extra pods count, the surge waits for room',
    state: surgeState([prev(0), prev(1), prev(2)], { replicas: 2 }),
    actions: [`startDrain ${O(2)}`],
    waiting: { [O(1)]: ['MaxSurgeReached'], [O(0)]: ['MaxSurgeReached'] },
  },
  {
    name: 'scaled down mid-surge: both pods of the extra ordinal drain, one ordinal of budget',
    state: surgeState([cur(0), prev(1), cur(1)], { replicas: 1 }),
    actions: [`startDrain ${O(1)}`, `startDrain ${N(1)}`],
  },
  {
    name: 'scaled down mid-surge with the budget used: one pod of the extra ordinal drains, not both',
    state: surgeState([starting(0), prev(1), cur(1)], { replicas: 1 }),
    actions: [`startDrain ${O(1)}`],
    waiting: { [N(1)]: ['MaxUnavailableReached'] },
  },
  {
    name: 'the new pod crash-loops: the old one keeps serving, Degraded',
    state: surgeState([prev(0), prev(1), prev(2), starting(2, 30, { waitingReason: 'CrashLoopBackOff' })]),
    actions: [],
    waiting: { [O(2)]: ['ReplacementNotReady'], [N(2)]: ['WaitingForReadiness'] },
    conditions: { Degraded: 'True/PodsFailing', Available: 'True/MinimumReplicasAvailable' },
    check: phase('Stalled'),
  },
  {
    name: 'maxSurge with pods that need a PVC: no surge, one pod per ordinal as before',
    state: observed([pod(0, { revision: OLD }), pod(1, { revision: OLD }), pod(2, { revision: OLD })], { maxSurge: 1 }),
    actions: ['startDrain atlantis-2'],
    waiting: { 'atlantis-1': ['HigherOrdinalFirst'] },
  },
  {
    name: 'Redis with maxSurge 0: drain first, then the new pod (named by revision, no PVC)',
    state: surgeState([prev(0), prev(1)], { maxSurge: 0 }),
    actions: [`createPod ${N(2)}@${NEW}`],
    waiting: { [O(1)]: ['HigherOrdinalFirst'] },
    check: (p) => assert.equal(actionsOf(p, 'createPod')[0]!.surge, undefined),
  },
  {
    name: 'maxSurge lowered to 0 mid-surge: the served old pod drains without budget, the next within it',
    state: surgeState([prev(0), prev(1), prev(2), cur(2)], { maxSurge: 0 }),
    actions: [`startDrain ${O(2)}`, `startDrain ${O(1)}`],
    waiting: { [O(0)]: ['HigherOrdinalFirst'] },
  },
];

/** Each surge guard alone; released: what the pod waits on next and the actions for its ordinal. */
export const surgeAlone = [
  {
    guard: 'MaxSurgeReached',
    pod: O(1),
    held: surgeState([prev(0), prev(1), prev(2), cur(2)]),
    released: surgeState([prev(0), prev(1), prev(2), cur(2)], { maxSurge: 2 }),
    thenWaits: ['ReplacementNotReady'],
    then: [`createPod ${N(1)}@${NEW}`],
  },
  {
    guard: 'WaitingForSurgePod',
    pod: O(1),
    held: surgeState([cur(0), prev(1), drainingAt(1, NEW, 10, ops, { deletionTimestamp: ago(1) })], { replicas: 2 }),
    released: surgeState([cur(0), prev(1)], { replicas: 2 }),
    thenWaits: ['ReplacementNotReady'],
    then: [`createPod ${N(1)}@${NEW}`],
  },
  {
    guard: 'ReplacementNotReady',
    pod: O(2),
    held: surgeState([cur(0), cur(1), prev(2), starting(2)]),
    released: surgeState([cur(0), cur(1), prev(2), cur(2)]),
    thenWaits: [],
    then: [`startDrain ${O(2)}`],
  },
  {
    guard: 'LeavingService',
    pod: O(2),
    held: surgeState([cur(0), cur(1), drainingAt(2, OLD, 3, DRAINED, { ready: true }), cur(2)]),
    released: surgeState([cur(0), cur(1), drainingAt(2, OLD, 3, DRAINED), cur(2)]),
    thenWaits: [],
    then: [`deletePod ${O(2)} Drained`],
  },
] as const;

export { ops };
