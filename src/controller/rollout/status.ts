// The AtlantisDeployment status a plan leaves behind: counts, revisions, conditions (their
// messages are for humans only: nothing reads them back) and the structured fields the next
// plan compares against (timedOutPods), from which events are derived (events.ts).
import type {
  AtlantisCondition,
  AtlantisDeploymentStatus,
  ConditionStatus,
  ConditionType,
  PodStatusSummary,
  RolloutPhase,
} from '../types.js';
import { selectorString } from '../resources/names.js';
import type { ObservedState, PodWait } from './plan.js';
import { formatTime, isAvailable, isDraining, isTerminating } from './pod-state.js';
import { kstatusConditions, kstatusFacts } from './conditions.js';

export interface StatusInputs {
  R: number;
  M: number;
  U: string;
  /** The API server's refusal of pods at U, or null. */
  rejected: string | null;
  /** Pods past drainTimeoutSeconds, waiting (onDrainTimeout Wait), highest ordinal first. */
  timedOut: string[];
  failing: string[];
  /** Per pod name: since when it drains (null: not draining). */
  drainingSince: ReadonlyMap<string, Date | null>;
  /** Pods whose drain starts in this plan. */
  drainsStarted: ReadonlySet<string>;
  waits: PodWait[];
  /** Pods this plan creates beside the live pods of their ordinal. */
  surgeCreates: number;
}

/**
 * Live pods of desired ordinals beyond one per ordinal: new-revision pods beside the old
 * ones. A scale-down's extra ordinals are not counted (they show in replicas).
 */
export function surgeReplicas(o: ObservedState, R: number): number {
  const perOrdinal = new Map<number, number>();
  for (const p of o.pods) if (p.ordinal < R && !isTerminating(p)) perOrdinal.set(p.ordinal, (perOrdinal.get(p.ordinal) ?? 0) + 1);
  let n = 0;
  for (const count of perOrdinal.values()) n += count - 1;
  return n;
}

/** One word for where the rollout is, the first that holds, for `kubectl get atd`. */
export function rolloutPhase(f: {
  complete: boolean;
  stalled: boolean;
  paused: boolean;
  /** Pods draining, or drained and terminating (a drain ends when the pod is gone). */
  draining: number;
  surge: number;
  extra: number;
}): RolloutPhase {
  if (f.complete) return 'Complete';
  if (f.stalled) return 'Stalled';
  if (f.paused) return 'Paused';
  if (f.draining > 0) return 'Draining';
  if (f.surge > 0) return 'Surging';
  if (f.extra > 0) return 'ScalingDown';
  return 'Updating';
}

export function computeStatus(o: ObservedState, now: Date, s: StatusInputs): { status: AtlantisDeploymentStatus; complete: boolean } {
  const { R, M, U } = s;
  const live = o.pods.filter((p) => !isTerminating(p));
  const desiredAvailable = new Set(live.filter((p) => p.ordinal < R && isAvailable(p)).map((p) => p.ordinal)).size;
  const complete =
    o.pods.every((p) => p.ordinal < R && !isTerminating(p) && p.revision === U && isAvailable(p)) &&
    new Set(o.pods.map((p) => p.ordinal)).size === R &&
    o.pods.length === R;

  const prev = o.previousStatus ?? null;
  const outdatedRevs = new Map<string, number>();
  for (const p of live) if (p.revision && p.revision !== U) outdatedRevs.set(p.revision, (outdatedRevs.get(p.revision) ?? 0) + 1);
  let currentRevision = U;
  if (!complete) {
    if (prev?.currentRevision && (prev.currentRevision === U || outdatedRevs.has(prev.currentRevision)))
      currentRevision = prev.currentRevision;
    else if (outdatedRevs.size > 0)
      currentRevision = [...outdatedRevs.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]![0];
    else currentRevision = prev?.currentRevision || U;
  }

  const conds: Array<Omit<AtlantisCondition, 'lastTransitionTime' | 'observedGeneration'>> = [];
  conds.push(
    desiredAvailable >= R - M
      ? {
          type: 'Available',
          status: 'True',
          reason: 'MinimumReplicasAvailable',
          message: `${desiredAvailable} of ${R} pod(s) available (maxUnavailable ${M})`,
        }
      : {
          type: 'Available',
          status: 'False',
          reason: 'MinimumReplicasUnavailable',
          message: `${desiredAvailable} of ${R} pod(s) available, need ${R - M} (maxUnavailable ${M})`,
        },
  );
  const waitSummary = s.waits
    .slice()
    .sort((a, b) => b.ordinal - a.ordinal)
    .map((w) => `${w.podName}: ${w.guards.join(', ')}`)
    .join('; ');
  const rejectedMessage =
    s.rejected === null ? '' : `The API server refuses pods of revision ${U}, so no pod is drained or deleted for it: ${s.rejected}`;
  let progressing: Omit<AtlantisCondition, 'lastTransitionTime' | 'observedGeneration'>;
  // First: nothing moves until the spec is fixed, whatever else waits.
  if (s.rejected !== null) progressing = { type: 'Progressing', status: 'False', reason: 'ReplacementRejected', message: rejectedMessage };
  else if (s.timedOut.length > 0)
    progressing = {
      type: 'Progressing',
      status: 'False',
      reason: 'DrainTimeout',
      message: `Drains past drainTimeoutSeconds, waiting (onDrainTimeout=Wait): ${s.timedOut.join(', ')}`,
    };
  else if (complete)
    progressing = { type: 'Progressing', status: 'True', reason: 'RolloutComplete', message: `All ${R} pod(s) at revision ${U} and Ready` };
  else if (s.failing.length > 0)
    progressing = { type: 'Progressing', status: 'False', reason: 'PodsFailing', message: `Pods failing: ${s.failing.join('; ')}` };
  else if (o.spec.paused)
    progressing = {
      type: 'Progressing',
      status: 'Unknown',
      reason: 'RolloutPaused',
      message: `Rollout paused${waitSummary ? `; waiting: ${waitSummary}` : ''}`,
    };
  else
    progressing = {
      type: 'Progressing',
      status: 'True',
      reason: 'RolloutInProgress',
      message: waitSummary ? `Waiting: ${waitSummary}` : 'Applying changes',
    };
  conds.push(progressing);
  conds.push(
    o.spec.paused
      ? { type: 'Paused', status: 'True', reason: 'Paused', message: 'spec.paused is true: no new drain starts' }
      : { type: 'Paused', status: 'False', reason: 'NotPaused', message: 'Rollout not paused' },
  );
  conds.push(
    s.rejected !== null
      ? {
          type: 'Degraded',
          status: 'True',
          reason: 'ReplacementRejected',
          message: `${rejectedMessage}${s.failing.length > 0 ? `; pods failing: ${s.failing.join('; ')}` : ''}`,
        }
      : s.failing.length > 0
        ? { type: 'Degraded', status: 'True', reason: 'PodsFailing', message: `Pods failing: ${s.failing.join('; ')}` }
        : { type: 'Degraded', status: 'False', reason: 'PodsHealthy', message: 'No pod is failing' },
  );
  // kstatus's Reconciling, Stalled and Ready, for kstatus, Flux, Argo CD and kubectl wait (conditions.ts).
  conds.push(...kstatusConditions(kstatusFacts(o, s, complete, desiredAvailable >= R - M)));

  const conditions: AtlantisCondition[] = conds.map((c) => {
    const before = prev?.conditions.find((x) => x.type === c.type);
    return {
      ...c,
      observedGeneration: o.generation,
      // metav1.Condition: the time the status last changed, not the last time we looked.
      lastTransitionTime: before && before.status === c.status ? before.lastTransitionTime : formatTime(now),
    };
  });

  const pods: PodStatusSummary[] = [...o.pods]
    .sort((a, b) => a.ordinal - b.ordinal || a.name.localeCompare(b.name))
    .map((p) => {
      const since = s.drainingSince.get(p.name) ?? null;
      return {
        name: p.name,
        revision: p.revision ?? '',
        ready: p.ready && p.phase === 'Running' && !isTerminating(p),
        drainingSince: since ? formatTime(since) : null,
        inProgressOperations: p.status?.ok ? p.status.body.in_progress_operations : null,
      };
    });

  const drainingReplicas = live.filter((p) => isDraining(p) || s.drainsStarted.has(p.name)).length;
  const surge = surgeReplicas(o, R);
  const status: AtlantisDeploymentStatus = {
    observedGeneration: o.generation,
    replicas: live.length,
    readyReplicas: live.filter((p) => p.ready && p.phase === 'Running').length,
    updatedReplicas: live.filter((p) => p.revision === U).length,
    drainingReplicas,
    surgeReplicas: surge,
    rolloutPhase: rolloutPhase({
      complete,
      stalled: progressing.status === 'False',
      paused: o.spec.paused,
      draining: drainingReplicas + o.pods.filter(isTerminating).length,
      surge: surge + s.surgeCreates,
      extra: live.filter((p) => p.ordinal >= R).length,
    }),
    currentRevision,
    updateRevision: U,
    selector: selectorString(o.name),
    conditions,
    pods,
    timedOutPods: s.timedOut,
  };
  return { status, complete };
}

/** Conditions by type, for callers that check one. */
export function condition(status: AtlantisDeploymentStatus, type: ConditionType): { status: ConditionStatus; reason: string } | undefined {
  const c = status.conditions.find((x) => x.type === type);
  return c ? { status: c.status, reason: c.reason } : undefined;
}
