// Classifies each observed pod on its own: what the rollout wants done with it (its step)
// and the facts the guards judge it by. Pure: no budget, no other pod, no plan state.
import type { OnDrainTimeout, StatusProbe } from '../types.js';
import type { PodObservation } from './plan.js';
import type { DeleteReason } from './plan.js';
import { drainStartTime, isDrained, isDraining, isFinished, isRunning, isTerminating } from './pod-state.js';
import type { Keeper } from './surge.js';

export type Step =
  /** Nothing to do to the pod itself: up to date, or already terminating. */
  | { kind: 'keep' }
  | { kind: 'startDrain'; why: string }
  /** `rollout`: an outdated pod replaced without a drain, a step pausing stops. */
  | { kind: 'delete'; reason: DeleteReason; rollout: boolean };

export type DrainWaitGuard = 'StatusUnreachable' | 'DrainInProgress' | 'OperationsInProgress';

/** A draining Running pod's drain. */
export interface DrainState {
  /** When the drain started; `now` for a hand drain seen without a start. */
  start: Date;
  elapsedMs: number;
  drained: boolean;
  /** drainTimeoutSeconds > 0 and passed. */
  pastTimeout: boolean;
  /** Why the drain is not over yet, from the last /status answer. */
  wait: { guard: DrainWaitGuard; detail: string };
}

export interface PodView {
  pod: PodObservation;
  /** Its ordinal is recreated once it is gone (within spec.replicas, and no other pod keeps it). */
  replace: boolean;
  /** Another pod keeps its ordinal (up to date, or created in this plan): this one goes once that is Ready. */
  replacedBy: string | null;
  step: Step;
  drain: DrainState | null;
  /** A hand drain ("now", "true", ...) without a readable start: stamp `now`, so its timeout has one. */
  stamp: boolean;
  /** Reported as drainingSince (null: not draining). */
  drainingSince: Date | null;
  /** What the pod is doing, to open its wait message. */
  summary: string;
}

export interface ClassifyContext {
  replicas: number;
  updateRevision: string;
  /** 0 = no timeout. */
  drainTimeoutSeconds: number;
  onDrainTimeout: OnDrainTimeout;
  now: Date;
  /** Per desired ordinal, the pod it keeps (surge.ts); absent = every pod stands for its ordinal alone. */
  keepers?: ReadonlyMap<number, Keeper>;
}

function drainWait(st: StatusProbe | null): DrainState['wait'] {
  if (!st) return { guard: 'StatusUnreachable', detail: 'no /status answer yet' };
  if (!st.ok) return { guard: 'StatusUnreachable', detail: `status unreachable (${st.error})` };
  if (!st.body.shutting_down) return { guard: 'DrainInProgress', detail: 'server not shutting down yet' };
  return { guard: 'OperationsInProgress', detail: `${st.body.in_progress_operations} operation(s) in progress` };
}

const phaseOf = (p: PodObservation): string => `${p.phase}${p.waitingReason ? ` (${p.waitingReason})` : ''}`;

export function classifyPod(p: PodObservation, c: ClassifyContext): PodView {
  const keeper = p.ordinal < c.replicas ? c.keepers?.get(p.ordinal) : undefined;
  const replacedBy = keeper && keeper.name !== p.name ? keeper.name : null;
  const replace = p.ordinal < c.replicas && replacedBy === null;
  const base = { pod: p, replace, replacedBy, drain: null, stamp: false, drainingSince: isDraining(p) ? drainStartTime(p) : null };
  if (isTerminating(p)) return { ...base, step: { kind: 'keep' }, summary: 'pod is terminating' };
  // The container is gone; nothing to drain. Recreated (or removed on scale-down).
  if (isFinished(p)) return { ...base, step: { kind: 'delete', reason: 'Failed', rollout: false }, summary: `pod ${p.phase}` };
  if (isDraining(p)) {
    const observedStart = drainStartTime(p);
    if (!isRunning(p))
      return {
        ...base,
        drainingSince: observedStart ?? c.now,
        step: { kind: 'delete', reason: 'NotRunning', rollout: false },
        summary: `draining and ${phaseOf(p)}`,
      };
    const start = observedStart ?? c.now;
    const elapsedMs = c.now.getTime() - start.getTime();
    const drained = isDrained(p.status);
    const pastTimeout = c.drainTimeoutSeconds > 0 && elapsedMs >= c.drainTimeoutSeconds * 1000;
    const reason: DeleteReason = !drained && pastTimeout && c.onDrainTimeout === 'Interrupt' ? 'DrainTimeout' : 'Drained';
    return {
      ...base,
      drain: { start, elapsedMs, drained, pastTimeout, wait: drainWait(p.status) },
      stamp: observedStart === null,
      drainingSince: start,
      step: { kind: 'delete', reason, rollout: false },
      summary: `draining for ${Math.round(elapsedMs / 1000)}s`,
    };
  }
  if (replacedBy !== null) {
    if (!isRunning(p))
      return {
        ...base,
        step: { kind: 'delete', reason: 'NotRunning', rollout: false },
        summary: `replaced by ${replacedBy} and ${phaseOf(p)}`,
      };
    const why =
      p.revision === c.updateRevision
        ? `${replacedBy} is the up-to-date pod of ordinal ${p.ordinal}`
        : `revision ${p.revision ?? 'none'} is outdated (want ${c.updateRevision}), replaced by ${replacedBy}`;
    return { ...base, step: { kind: 'startDrain', why }, summary: why };
  }
  if (!replace) {
    if (!isRunning(p))
      return { ...base, step: { kind: 'delete', reason: 'NotRunning', rollout: false }, summary: `extra and ${phaseOf(p)}` };
    return { ...base, step: { kind: 'startDrain', why: `scale down to ${c.replicas}` }, summary: `scale down to ${c.replicas}` };
  }
  if (p.revision === c.updateRevision) return { ...base, step: { kind: 'keep' }, summary: `pod ${phaseOf(p)}` };
  // Pending, crash-looping, image-pull errors: no terraform to protect, replace without a drain.
  if (!isRunning(p))
    return { ...base, step: { kind: 'delete', reason: 'NotRunning', rollout: true }, summary: `outdated and ${phaseOf(p)}` };
  const why = `revision ${p.revision ?? 'none'} is outdated (want ${c.updateRevision})`;
  return { ...base, step: { kind: 'startDrain', why }, summary: why };
}
