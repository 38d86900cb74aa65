// Named rollout guards, in the manner of ECK's upgrade predicates: each guard looks at one
// classified pod (and the budget left in this pass) and, on its own, can hold the pod's step
// back. A pod waits while any guard holds it; the names of all that do are what the plan's
// `waiting` and the Progressing condition report, so they say *why* atlantis-0 waits.
import type { OnDrainTimeout } from '../types.js';
import type { GuardName, SurgeGuardName } from './plan.js';
import type { PodView } from './classify.js';
import { isAvailable, isTerminating } from './pod-state.js';
import type { Keeper, SurgeHold } from './surge.js';

/**
 * How long after its drain started a drained pod that is still Ready may wait to leave the
 * Service. A draining server fails its readiness probe (every 2 s) at once, so this is reached
 * only by a pod that stays Ready on purpose (--queue-during-drain).
 */
export const LEAVE_SERVICE_WAIT_MS = 15_000;

export interface GuardContext {
  paused: boolean;
  /** The API server refuses pods of the update revision (its dry-run create failed). */
  replacementRejected: boolean;
  updateRevision: string;
  maxUnavailable: number;
  drainTimeoutSeconds: number;
  onDrainTimeout: OnDrainTimeout;
  /** Ordinals not-ready-or-draining (or missing) now, the drains granted earlier in this pass included. */
  unavailable: ReadonlySet<number>;
  podName: (ordinal: number) => string;
  /** Another pod of the ordinal is available: draining this one leaves the ordinal served. */
  servedBeside: (v: PodView) => boolean;
  /** Effective maxSurge: 0 turns the surge guards off. */
  maxSurge: number;
  /** replicas + maxSurge: the live pods a surge may reach. */
  surgeLimit: number;
  keepers: ReadonlyMap<number, Keeper>;
  surgeHolds: ReadonlyMap<number, SurgeHold>;
  nextName: (ordinal: number) => string;
}

export interface Guard {
  name: GuardName;
  /** Why this guard holds the pod back, or null when it lets the pod's step go. */
  holds(v: PodView, c: GuardContext): string | null;
  /** When it holds: in how long it lets go by itself (no event may say so). */
  releasesInMs?(v: PodView): number | undefined;
}

const disrupts = (v: PodView): boolean => v.step.kind !== 'keep';
/**
 * Starting this drain costs budget (the pod is still available) and none is left. With a
 * surge a desired ordinal's pod drains only beside its Ready replacement (SURGE_GUARDS), which
 * costs none, so the budget rules only the scale-down there.
 */
const budgetFull = (v: PodView, c: GuardContext): boolean =>
  v.step.kind === 'startDrain' &&
  !(c.maxSurge > 0 && (v.replace || v.replacedBy !== null)) &&
  !c.unavailable.has(v.pod.ordinal) &&
  !c.servedBeside(v) &&
  c.unavailable.size >= c.maxUnavailable;
const higherUnavailable = (v: PodView, c: GuardContext): boolean => [...c.unavailable].some((o) => o > v.pod.ordinal);
const budgetDetail = (c: GuardContext): string =>
  `maxUnavailable ${c.maxUnavailable} reached, unavailable: ${[...c.unavailable]
    .sort((a, b) => b - a)
    .map(c.podName)
    .join(', ')}`;
/** A drain still running: not drained, and its timeout (if any) not passed yet. */
const drainWaits = (v: PodView, guard: GuardName): string | null =>
  v.drain && !v.drain.drained && !v.drain.pastTimeout && v.drain.wait.guard === guard ? v.drain.wait.detail : null;

/** Checked in this order; the order is the order of names in a pod's wait. */
export const GUARDS: readonly Guard[] = [
  /** spec.paused: no new drain starts, no outdated pod is replaced (drains begun go on). */
  {
    name: 'Paused',
    holds: (v, c) =>
      c.paused && (v.step.kind === 'startDrain' || (v.step.kind === 'delete' && v.step.rollout)) ? 'spec.paused is true' : null,
  },
  /** The pod's ordinal could not be recreated: it is not drained or deleted. Scale-down goes on. */
  {
    name: 'ReplacementRejected',
    holds: (v, c) =>
      c.replacementRejected && v.replace && disrupts(v) ? `the API server refuses pods of revision ${c.updateRevision}` : null,
  },
  /** No budget left, and none of it is held by a higher ordinal (a broken lower pod, say). */
  { name: 'MaxUnavailableReached', holds: (v, c) => (budgetFull(v, c) && !higherUnavailable(v, c) ? budgetDetail(c) : null) },
  /** No budget left, and higher ordinals hold some of it: they roll out first. */
  { name: 'HigherOrdinalFirst', holds: (v, c) => (budgetFull(v, c) && higherUnavailable(v, c) ? budgetDetail(c) : null) },
  /** Drain annotation set, but the server does not report shutting_down yet. */
  { name: 'DrainInProgress', holds: (v) => drainWaits(v, 'DrainInProgress') },
  /** The server is shutting down but still runs operations. */
  { name: 'OperationsInProgress', holds: (v) => drainWaits(v, 'OperationsInProgress') },
  /** A draining Running pod whose /status did not answer (or was not polled yet). */
  { name: 'StatusUnreachable', holds: (v) => drainWaits(v, 'StatusUnreachable') },
  /** Past drainTimeoutSeconds with onDrainTimeout Wait: the policy, not the server, holds it now. */
  {
    name: 'DrainTimeout',
    holds: (v, c) =>
      v.drain && !v.drain.drained && v.drain.pastTimeout && c.onDrainTimeout === 'Wait'
        ? `past drainTimeoutSeconds ${c.drainTimeoutSeconds}: ${v.drain.wait.detail}`
        : null,
  },
  /** An up-to-date pod that is not Ready yet. */
  {
    name: 'WaitingForReadiness',
    holds: (v) => (v.step.kind === 'keep' && !isTerminating(v.pod) && !isAvailable(v.pod) ? 'not Ready' : null),
  },
  /** A pod with a deletionTimestamp whose ordinal is not recreated (scale-down). */
  { name: 'Terminating', holds: (v) => (isTerminating(v.pod) && !v.replace ? 'kubelet is stopping it' : null) },
  /** The ordinal's old pod is still terminating, so its replacement cannot be created yet. */
  { name: 'WaitingForTermination', holds: (v) => (isTerminating(v.pod) && v.replace ? 'its replacement waits until it is gone' : null) },
];

/** A drain of a desired ordinal's pod that no other pod keeps. */
const rolloutDrain = (v: PodView): boolean => v.step.kind === 'startDrain' && v.replace;

/**
 * With maxSurge > 0 an old pod is drained only once its ordinal's pod of the update revision
 * is Ready, so these hold it until then, saying what that pod waits on. Checked after GUARDS.
 */
export const SURGE_GUARDS: readonly Guard[] = [
  /** Its ordinal's new pod cannot be created: replicas + maxSurge pods are live. */
  {
    name: 'MaxSurgeReached',
    holds: (v, c) =>
      rolloutDrain(v) && c.surgeHolds.get(v.pod.ordinal) === 'noRoom'
        ? `${c.surgeLimit} pod(s) live (replicas + maxSurge ${c.maxSurge}): ${c.nextName(v.pod.ordinal)} waits for room`
        : null,
  },
  /** Its ordinal's new pod has the name of a pod still going away (a drained or failed namesake). */
  {
    name: 'WaitingForSurgePod',
    holds: (v, c) =>
      rolloutDrain(v) && c.surgeHolds.get(v.pod.ordinal) === 'nameTaken'
        ? `${c.nextName(v.pod.ordinal)} is created once its namesake is gone`
        : null,
  },
  /** Its ordinal's new pod exists (or is created now) and is not Ready yet. */
  {
    name: 'ReplacementNotReady',
    holds: (v, c) => {
      if (v.step.kind !== 'startDrain' || v.replacedBy === null) return null;
      const k = c.keepers.get(v.pod.ordinal);
      if (!k || k.available) return null;
      return k.planned ? `its replacement ${k.name} is created now` : `its replacement ${k.name} is not Ready`;
    },
  },
  /**
   * Drained, yet still Ready: the Service may still route a new connection to it, which its
   * exit would refuse. Deleted once its readiness probe has taken it out (the others serve).
   */
  {
    name: 'LeavingService',
    holds: (v) =>
      v.step.kind === 'delete' && v.drain?.drained && v.pod.ready && v.drain.elapsedMs < LEAVE_SERVICE_WAIT_MS
        ? `drained but still Ready: deleted once its readiness probe takes it out of the Service (at most ${LEAVE_SERVICE_WAIT_MS / 1000}s after the drain started)`
        : null,
    // Its Ready change wakes the controller; this bounds the wait.
    releasesInMs: (v) => (v.drain ? LEAVE_SERVICE_WAIT_MS - v.drain.elapsedMs : undefined),
  },
];

/** The guards of every rollout (SURGE_GUARDS come on top with maxSurge > 0). */
export const GUARD_NAMES: readonly GuardName[] = GUARDS.map((g) => g.name);
export const SURGE_GUARD_NAMES: readonly SurgeGuardName[] = SURGE_GUARDS.map((g) => g.name as SurgeGuardName);
export const ALL_GUARD_NAMES: readonly GuardName[] = [...GUARD_NAMES, ...SURGE_GUARD_NAMES];

/** The guards holding this pod back, with why; empty = its step may go ahead. */
export function holdingGuards(v: PodView, c: GuardContext): Array<{ name: GuardName; detail: string; releasesInMs?: number }> {
  return (c.maxSurge > 0 ? [...GUARDS, ...SURGE_GUARDS] : GUARDS).flatMap((g) => {
    const detail = g.holds(v, c);
    if (detail === null) return [];
    const releasesInMs = g.releasesInMs?.(v);
    return [{ name: g.name, detail, ...(releasesInMs !== undefined ? { releasesInMs } : {}) }];
  });
}
