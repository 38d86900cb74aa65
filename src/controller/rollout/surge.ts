// Per desired ordinal: the pod it keeps (its up-to-date pod) and, with maxSurge, the pod of
// the update revision to create beside the old ones. Decided before the pods are classified:
// whether an old pod may be drained depends on its ordinal's up-to-date pod being Ready.
// Pure, like the rest of the planner.
import { type PodNaming, podNameFor } from '../resources/names.js';
import type { PodObservation } from './plan.js';
import { isAvailable, isDraining, isFinished, isTerminating } from './pod-state.js';

/** The pod an ordinal keeps: at the update revision, not draining, terminating or finished. */
export interface Keeper {
  name: string;
  /** Ready, Running and not draining; never for a pod created in this plan. */
  available: boolean;
  /** Created in this plan: the cache does not show it yet. */
  planned: boolean;
}

/**
 * Why an ordinal without a keeper gets no pod in this plan: no room under replicas +
 * maxSurge, its pod's name still taken by a namesake going away, spec.paused (a surge is
 * rollout progress), or the API server refuses pods of the update revision.
 */
export type SurgeHold = 'noRoom' | 'nameTaken' | 'paused' | 'rejected';

export interface PodCreate {
  ordinal: number;
  name: string;
  /** Created beside the ordinal's live pods (`beside`), not in place of a missing one. */
  surge: boolean;
  beside: string[];
}

export interface OrdinalPlan {
  keepers: ReadonlyMap<number, Keeper>;
  holds: ReadonlyMap<number, SurgeHold>;
  /** Only with maxSurge > 0; without, the planner creates missing ordinals as it always did. */
  creates: PodCreate[];
  /** The ordinal's pod to create next (the keeper's name once it exists). */
  nextName: (ordinal: number) => string;
}

export interface OrdinalContext {
  name: string;
  replicas: number;
  updateRevision: string;
  naming: PodNaming;
  /** Effective surge: 0 when pods need a PVC. */
  maxSurge: number;
  paused: boolean;
  rejected: boolean;
}

const isCandidate = (p: PodObservation, U: string): boolean => !isTerminating(p) && !isDraining(p) && !isFinished(p) && p.revision === U;

/**
 * The ordinal's keeper among its pods: a Ready one first, then the one with the expected
 * name, then the oldest. Any other up-to-date pod of the ordinal is surplus (drained).
 */
export function keeperOf(pods: readonly PodObservation[], updateRevision: string, nextName: string): PodObservation | null {
  const time = (p: PodObservation): number => p.createdAt?.getTime() ?? Number.MAX_SAFE_INTEGER;
  const candidates = pods
    .filter((p) => isCandidate(p, updateRevision))
    .sort(
      (a, b) =>
        Number(isAvailable(b)) - Number(isAvailable(a)) ||
        Number(b.name === nextName) - Number(a.name === nextName) ||
        time(a) - time(b) ||
        a.name.localeCompare(b.name),
    );
  return candidates[0] ?? null;
}

export function planOrdinals(pods: readonly PodObservation[], c: OrdinalContext): OrdinalPlan {
  const R = c.replicas;
  const nextName = (i: number): string => podNameFor(c.name, i, c.updateRevision, c.naming);
  const byOrdinal = new Map<number, PodObservation[]>();
  for (const p of pods) byOrdinal.set(p.ordinal, [...(byOrdinal.get(p.ordinal) ?? []), p]);
  const liveOf = (i: number): PodObservation[] => (byOrdinal.get(i) ?? []).filter((p) => !isTerminating(p));

  const keepers = new Map<number, Keeper>();
  for (let i = 0; i < R; i++) {
    const k = keeperOf(byOrdinal.get(i) ?? [], c.updateRevision, nextName(i));
    if (k) keepers.set(i, { name: k.name, available: isAvailable(k), planned: false });
  }
  const holds = new Map<number, SurgeHold>();
  const creates: PodCreate[] = [];
  if (c.maxSurge <= 0) return { keepers, holds, creates, nextName };

  const taken = new Set(pods.map((p) => p.name));
  // Not-terminating pods of any ordinal count, those of a scale-down too.
  let live = pods.filter((p) => !isTerminating(p)).length;
  const needing: number[] = [];
  for (let i = 0; i < R; i++) if (!keepers.has(i)) needing.push(i);
  // Ordinals with no live pod first (filled whatever the surge, as a missing pod always was),
  // then the surge, highest ordinal first as the rollout goes.
  const order = [...needing.filter((i) => liveOf(i).length === 0), ...needing.filter((i) => liveOf(i).length > 0).reverse()];
  for (const i of order) {
    const name = nextName(i);
    const beside = liveOf(i).map((p) => p.name);
    const surge = beside.length > 0;
    let hold: SurgeHold | null = null;
    if (c.rejected) hold = 'rejected';
    else if (taken.has(name)) hold = 'nameTaken';
    else if (surge && c.paused) hold = 'paused';
    else if (surge && live >= R + c.maxSurge) hold = 'noRoom';
    if (hold !== null) {
      holds.set(i, hold);
      continue;
    }
    creates.push({ ordinal: i, name, surge, beside });
    live++;
    keepers.set(i, { name, available: false, planned: true });
  }
  return { keepers, holds, creates, nextName };
}
