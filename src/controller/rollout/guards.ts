// Named rollout guards (in the manner of ECK's upgrade predicates): each one is a reason a
// pod is held back. The planner reports the names of every guard holding a pod, so the
// status and logs can say *why* atlantis-0 waits, not just that it does.

export type GuardName =
  /** spec.paused: no new drain starts. */
  | 'Paused'
  /**
   * The API server refuses pods of the update revision (a dry-run create failed): the pod is
   * not drained, deleted or created, since its replacement could not be created.
   */
  | 'ReplacementRejected'
  /** Starting this drain would make more than maxUnavailable pods not-ready-or-draining. */
  | 'MaxUnavailableReached'
  /** The unavailability budget is held by the rollout of higher ordinals, which go first. */
  | 'HigherOrdinalFirst'
  /** Drain annotation set, but the server does not report shutting_down yet. */
  | 'DrainInProgress'
  /** The server is shutting down but still runs operations. */
  | 'OperationsInProgress'
  /** The pod is Running but its /status did not answer (or was not polled yet). */
  | 'StatusUnreachable'
  /** The drain passed drainTimeoutSeconds and onDrainTimeout is Wait. */
  | 'DrainTimeout'
  /** An up-to-date pod exists but is not Ready yet. */
  | 'WaitingForReadiness'
  /** The pod has a deletionTimestamp: kubelet is stopping it. */
  | 'Terminating'
  /** The ordinal's old pod is still terminating, so its replacement cannot be created yet. */
  | 'WaitingForTermination';

export const GUARD_NAMES: readonly GuardName[] = [
  'Paused',
  'ReplacementRejected',
  'MaxUnavailableReached',
  'HigherOrdinalFirst',
  'DrainInProgress',
  'OperationsInProgress',
  'StatusUnreachable',
  'DrainTimeout',
  'WaitingForReadiness',
  'Terminating',
  'WaitingForTermination',
];

/** What the drain-start guards look at for one candidate pod. */
export interface DrainCandidate {
  ordinal: number;
  /** The pod already counts as unavailable (not ready), so draining it costs no budget. */
  alreadyUnavailable: boolean;
  /** Its ordinal is recreated after the drain (a rollout, not a scale-down). */
  replaced: boolean;
}

export interface DrainBudget {
  paused: boolean;
  maxUnavailable: number;
  /** Pods not-ready-or-draining (or missing) right now, including drains planned in this pass. */
  unavailable: number;
  /** Ordinals currently counted in `unavailable`. */
  unavailableOrdinals: readonly number[];
  /** The API server refuses pods of the update revision. */
  replacementRejected: boolean;
}

export interface DrainGuard {
  name: GuardName;
  /** true = this guard lets the drain start. */
  allows(budget: DrainBudget, pod: DrainCandidate): boolean;
}

const budgetLeft = (b: DrainBudget, p: DrainCandidate): boolean => p.alreadyUnavailable || b.unavailable < b.maxUnavailable;

/** Checked, in order, before a new drain starts; all must allow it. */
export const DRAIN_GUARDS: readonly DrainGuard[] = [
  { name: 'Paused', allows: (b) => !b.paused },
  { name: 'ReplacementRejected', allows: (b, p) => !(b.replacementRejected && p.replaced) },
  { name: 'MaxUnavailableReached', allows: budgetLeft },
  {
    name: 'HigherOrdinalFirst',
    allows: (b, p) => budgetLeft(b, p) || !b.unavailableOrdinals.some((o) => o > p.ordinal),
  },
];

/** Names of the guards that hold this candidate back; empty = the drain may start. */
export function blockingGuards(budget: DrainBudget, pod: DrainCandidate): GuardName[] {
  return DRAIN_GUARDS.filter((g) => !g.allows(budget, pod)).map((g) => g.name);
}
