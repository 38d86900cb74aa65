// The rollout planner (SPEC section 7): observed state in, actions out. Pure and level-based:
// it decides only from what is observed now (pods, their annotations, the last /status
// poll, the PVCs, the previous status), so a restarted controller, or another replica after
// a leader change, carries on exactly where the last one stopped. The executor performs the
// actions in order and requeues after `requeueAfterMs`.
import { drainRequested, reportsDrained } from '../../contract/drain-protocol.js';
import type { AtlantisCondition, AtlantisDeploymentStatus, ConditionStatus, ConditionType, OnDrainTimeout, PodStatusSummary, StatusProbe } from '../types.js';
import { podName, pvcName, selectorString } from '../resources/names.js';
import { blockingGuards, type GuardName } from './guards.js';
import type { PodObservation } from './observe.js';

export interface RolloutSpec {
  replicas: number;
  /** Revision of the current spec (podTemplateRevision). */
  updateRevision: string;
  maxUnavailable: number;
  paused: boolean;
  /** 0 = no timeout. */
  drainTimeoutSeconds: number;
  onDrainTimeout: OnDrainTimeout;
}

export interface ObservedState {
  name: string;
  namespace: string;
  /** metadata.generation, reported as observedGeneration. */
  generation: number;
  spec: RolloutSpec;
  /** Every pod owned by the AtlantisDeployment, any ordinal, terminating ones included. */
  pods: PodObservation[];
  /** Ordinals whose PVC exists. */
  pvcOrdinals: number[];
  /** status as last written, so conditions keep lastTransitionTime and events fire once. */
  previousStatus?: AtlantisDeploymentStatus | null;
  /**
   * The API server's message when it refused a dry-run create of a pod at
   * spec.updateRevision; null/absent = accepted or not checked (no replacement needed).
   */
  replacementRejected?: string | null;
}

export interface PlannerOptions {
  /** How soon to poll /status again while a drain is in progress. */
  statusPollIntervalMs?: number;
  /** An up-to-date pod not Ready after this long since creation makes the deployment Degraded. */
  progressDeadlineSeconds?: number;
}

export const DEFAULT_STATUS_POLL_INTERVAL_MS = 500;
export const DEFAULT_PROGRESS_DEADLINE_SECONDS = 600;

/** Container waiting reasons that mean the server will not start by itself. */
export const FAILING_WAITING_REASONS: ReadonlySet<string> = new Set([
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'ErrImagePull',
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

export type EventReason = 'DrainStarted' | 'Drained' | 'DrainTimeout' | 'PodReplaced' | 'ReplacementRejected' | 'RolloutComplete';

/** Why a pod is deleted: Drained (status said shutting_down and 0 operations), DrainTimeout
 * (onDrainTimeout Interrupt), NotRunning (no terraform can run in it), Failed (phase Failed/Succeeded). */
export type DeleteReason = 'Drained' | 'DrainTimeout' | 'NotRunning' | 'Failed';

export type Action =
  | { type: 'createPVC'; ordinal: number; name: string }
  | { type: 'createPod'; ordinal: number; name: string; revision: string }
  /** Patch metadata.annotations[atlantis-operator.dev/drain] = value (an RFC 3339 time). */
  | { type: 'startDrain'; ordinal: number; podName: string; uid: string; value: string }
  /** Patch atlantis-operator.dev/drain-started-at = value on a hand-drained pod, so its timeout has a start. */
  | { type: 'stampDrainStart'; ordinal: number; podName: string; uid: string; value: string }
  /** Delete with preconditions.uid = uid. `replace`: the ordinal is recreated once the pod is gone. */
  | {
      type: 'deletePod';
      ordinal: number;
      podName: string;
      uid: string;
      reason: DeleteReason;
      replace: boolean;
      /** Seconds from drain start to this delete, for atlantis_operator_drain_duration_seconds; null when not drained. */
      drainDurationSeconds: number | null;
    }
  | { type: 'emitEvent'; eventType: 'Normal' | 'Warning'; reason: EventReason; message: string; podName: string | null };

export type ActionType = Action['type'];

export interface PodWait {
  ordinal: number;
  podName: string;
  guards: GuardName[];
  message: string;
}

export interface Plan {
  actions: Action[];
  /** Pods (and missing ordinals) held back, with the guards holding them. */
  waiting: PodWait[];
  /** Requeue hint; null = only watch events need to wake the controller. */
  requeueAfterMs: number | null;
  status: AtlantisDeploymentStatus;
  /** Every desired pod exists, is up to date, Ready and not draining; nothing extra is left. */
  complete: boolean;
}

// ---- pod predicates -------------------------------------------------------------------

export const isTerminating = (p: PodObservation): boolean => p.deletionTimestamp !== null;
export const isDraining = (p: PodObservation): boolean => drainRequested(p.drainAnnotation);
/** Running with a container that is not stuck restarting: terraform may be running in it. */
export const isRunning = (p: PodObservation): boolean =>
  p.phase === 'Running' && !(p.waitingReason !== null && FAILING_WAITING_REASONS.has(p.waitingReason));
/** The end of a drain: the server shuts down and runs nothing. Final for a server process. */
export const isDrained = (st: StatusProbe | null | undefined): boolean => !!st?.ok && reportsDrained(st.body);
/** Why a draining pod that is not drained still waits, from its last /status answer (none yet: null). */
function drainWait(st: StatusProbe | null): { guard: GuardName; detail: string } {
  if (!st) return { guard: 'StatusUnreachable', detail: 'no /status answer yet' };
  if (!st.ok) return { guard: 'StatusUnreachable', detail: `status unreachable (${st.error})` };
  if (!st.body.shutting_down) return { guard: 'DrainInProgress', detail: 'server not shutting down yet' };
  return { guard: 'OperationsInProgress', detail: `${st.body.in_progress_operations} operation(s) in progress` };
}
/** Counts toward availability: Running, Ready, not draining, not terminating. */
export const isAvailable = (p: PodObservation): boolean => !isTerminating(p) && !isDraining(p) && p.phase === 'Running' && p.ready;

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export function parseTime(value: string | null): Date | null {
  if (!value || !RFC3339.test(value)) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** RFC 3339 in whole seconds, as the API server writes times. */
export function formatTime(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** When the drain started: the annotation's time, else the controller's stamp, else unknown. */
export function drainStartTime(p: PodObservation): Date | null {
  return parseTime(p.drainAnnotation) ?? parseTime(p.drainStartedAtAnnotation);
}

// ---- the planner ------------------------------------------------------------------------

export function planRollout(o: ObservedState, now: Date, options: PlannerOptions = {}): Plan {
  const pollMs = options.statusPollIntervalMs ?? DEFAULT_STATUS_POLL_INTERVAL_MS;
  const deadlineS = options.progressDeadlineSeconds ?? DEFAULT_PROGRESS_DEADLINE_SECONDS;
  const { updateRevision: U, paused, drainTimeoutSeconds, onDrainTimeout } = o.spec;
  const R = Math.max(0, Math.floor(o.spec.replicas));
  // The CRD requires >= 1; a 0 would deadlock the rollout, so it is treated as 1.
  const M = Math.max(1, Math.floor(o.spec.maxUnavailable));
  const nowIso = formatTime(now);

  const actions: Action[] = [];
  const waits = new Map<string, PodWait>();
  let requeueAfterMs: number | null = null;
  const requeue = (ms: number): void => {
    const v = Math.max(0, Math.ceil(ms));
    requeueAfterMs = requeueAfterMs === null ? v : Math.min(requeueAfterMs, v);
  };
  const wait = (ordinal: number, name: string, guards: GuardName[], message: string): void => {
    const w = waits.get(name);
    if (w) {
      for (const g of guards) if (!w.guards.includes(g)) w.guards.push(g);
      w.message = `${w.message}; ${message}`;
    } else waits.set(name, { ordinal, podName: name, guards: [...guards], message });
  };
  const event = (eventType: 'Normal' | 'Warning', reason: EventReason, message: string, pod: string | null): void => {
    actions.push({ type: 'emitEvent', eventType, reason, message, podName: pod });
  };

  // Highest ordinal first: scale-down pods, then the rollout from the top.
  const pods = [...o.pods].sort((a, b) => b.ordinal - a.ordinal || a.name.localeCompare(b.name));
  const pvcs = new Set(o.pvcOrdinals);

  // Pods not-ready-or-draining (or missing) now. Drains planned below are added as they are
  // planned, so one pass never exceeds maxUnavailable.
  const unavailable = new Set<number>();
  for (let i = 0; i < R; i++) if (!pods.some((p) => p.ordinal === i && isAvailable(p))) unavailable.add(i);
  for (const p of pods) if (p.ordinal >= R && !isAvailable(p)) unavailable.add(p.ordinal);

  const previousTimedOut = new Set(timedOutPodsFromStatus(o.previousStatus ?? null));
  const timedOut: string[] = [];
  const failing: string[] = [];
  const drainingSince = new Map<string, Date>();

  const rejected = o.replacementRejected ? truncate(o.replacementRejected, MAX_REJECTION_CHARS) : null;
  const holdForRejection = (ordinal: number, name: string, what: string): void =>
    wait(ordinal, name, ['ReplacementRejected'], `${what}: the API server refuses pods of revision ${U}`);

  const deletePod = (p: PodObservation, reason: DeleteReason, drainStart: Date | null): void => {
    const replace = p.ordinal < R;
    // Never remove a pod whose replacement cannot be created: a drained server keeps its
    // ordinal (and PVC) until the spec is fixed, rather than leaving nothing behind.
    if (replace && rejected !== null) return holdForRejection(p.ordinal, p.name, `not deleted (${reason})`);
    const drainDurationSeconds = drainStart && reason !== 'NotRunning' && reason !== 'Failed' ? Math.max(0, (now.getTime() - drainStart.getTime()) / 1000) : null;
    actions.push({ type: 'deletePod', ordinal: p.ordinal, podName: p.name, uid: p.uid, reason, replace, drainDurationSeconds });
    if (reason === 'Drained') event('Normal', 'Drained', `Pod ${p.name} drained${drainDurationSeconds !== null ? ` after ${Math.round(drainDurationSeconds)}s` : ''}: no operation in progress`, p.name);
    if (reason === 'DrainTimeout')
      event('Warning', 'DrainTimeout', `Pod ${p.name} still draining after ${drainTimeoutSeconds}s; deleting it (onDrainTimeout=Interrupt), the server interrupts terraform cleanly`, p.name);
    if (replace)
      event('Normal', 'PodReplaced', `Deleting pod ${p.name} (revision ${p.revision ?? 'none'}, ${reason}) to recreate it at revision ${U}`, p.name);
  };

  const tryStartDrain = (p: PodObservation, why: string): void => {
    const guards = blockingGuards(
      { paused, maxUnavailable: M, unavailable: unavailable.size, unavailableOrdinals: [...unavailable], replacementRejected: rejected !== null },
      { ordinal: p.ordinal, alreadyUnavailable: unavailable.has(p.ordinal), replaced: p.ordinal < R },
    );
    if (guards.length > 0) {
      const busy = [...unavailable].sort((a, b) => b - a).map((i) => podName(o.name, i));
      wait(p.ordinal, p.name, guards, `${why}; drain held back (${guards.join(', ')})${busy.length ? `, unavailable: ${busy.join(', ')}` : ''}`);
      return;
    }
    actions.push({ type: 'startDrain', ordinal: p.ordinal, podName: p.name, uid: p.uid, value: nowIso });
    event('Normal', 'DrainStarted', `Draining pod ${p.name}: ${why}`, p.name);
    unavailable.add(p.ordinal);
    drainingSince.set(p.name, now);
    requeue(pollMs);
  };

  const handleDrain = (p: PodObservation): void => {
    const observedStart = drainStartTime(p);
    if (!isRunning(p)) {
      drainingSince.set(p.name, observedStart ?? now);
      deletePod(p, 'NotRunning', observedStart);
      return;
    }
    let start = observedStart;
    if (start === null) {
      // A hand drain ("now", "true", ...): stamp when we first saw it, so the timeout has a start.
      actions.push({ type: 'stampDrainStart', ordinal: p.ordinal, podName: p.name, uid: p.uid, value: nowIso });
      start = now;
    }
    drainingSince.set(p.name, start);
    const st = p.status;
    if (isDrained(st)) {
      deletePod(p, 'Drained', start);
      return;
    }
    const elapsedMs = now.getTime() - start.getTime();
    const { guard, detail } = drainWait(st);
    if (drainTimeoutSeconds > 0 && elapsedMs >= drainTimeoutSeconds * 1000) {
      if (onDrainTimeout === 'Interrupt') {
        deletePod(p, 'DrainTimeout', start);
        return;
      }
      timedOut.push(p.name);
      if (!previousTimedOut.has(p.name))
        event('Warning', 'DrainTimeout', `Pod ${p.name} still draining after ${drainTimeoutSeconds}s (${detail}); waiting (onDrainTimeout=Wait)`, p.name);
      wait(p.ordinal, p.name, ['DrainTimeout', guard], `draining for ${Math.round(elapsedMs / 1000)}s, past drainTimeoutSeconds ${drainTimeoutSeconds}: ${detail}`);
      requeue(pollMs);
      return;
    }
    wait(p.ordinal, p.name, [guard], `draining for ${Math.round(elapsedMs / 1000)}s: ${detail}`);
    requeue(pollMs);
    if (drainTimeoutSeconds > 0) requeue(drainTimeoutSeconds * 1000 - elapsedMs);
  };

  for (const p of pods) {
    const outdated = p.revision !== U;
    if (isTerminating(p)) {
      wait(p.ordinal, p.name, p.ordinal < R ? ['Terminating', 'WaitingForTermination'] : ['Terminating'], 'pod is terminating');
      continue;
    }
    if (p.phase === 'Failed' || p.phase === 'Succeeded') {
      // The container is gone; nothing to drain. Recreated (or removed on scale-down).
      deletePod(p, 'Failed', null);
      continue;
    }
    if (isDraining(p)) {
      handleDrain(p);
      continue;
    }
    if (p.ordinal >= R) {
      if (!isRunning(p)) deletePod(p, 'NotRunning', null);
      else tryStartDrain(p, `scale down to ${R}`);
      continue;
    }
    if (!outdated) {
      if (!isAvailable(p)) {
        wait(p.ordinal, p.name, ['WaitingForReadiness'], `pod ${p.phase}${p.waitingReason ? ` (${p.waitingReason})` : ''}, not Ready`);
        if (p.createdAt) {
          const ageMs = now.getTime() - p.createdAt.getTime();
          if (ageMs >= deadlineS * 1000) {
            if (!(p.waitingReason !== null && FAILING_WAITING_REASONS.has(p.waitingReason)) && !p.unschedulable)
              // No elapsed time in the message: status text must stay stable between reconciles.
              failing.push(`${p.name}: not Ready within ${deadlineS}s of creation`);
          } else requeue(deadlineS * 1000 - ageMs);
        }
      }
      continue;
    }
    // Outdated, within the desired replicas.
    if (!isRunning(p)) {
      // Pending, crash-looping, image-pull errors: no terraform to protect, replace now.
      if (paused) wait(p.ordinal, p.name, ['Paused'], `outdated and ${p.phase}${p.waitingReason ? ` (${p.waitingReason})` : ''}`);
      else deletePod(p, 'NotRunning', null);
      continue;
    }
    tryStartDrain(p, `revision ${p.revision ?? 'none'} is outdated (want ${U})`);
  }

  // A pod deleted in this plan is being dealt with; only the failing pods that stay count.
  const deleted = new Set(actions.flatMap((a) => (a.type === 'deletePod' ? [a.podName] : [])));
  for (const p of pods) {
    if (isTerminating(p) || deleted.has(p.name)) continue;
    if (p.waitingReason !== null && FAILING_WAITING_REASONS.has(p.waitingReason)) failing.unshift(`${p.name}: ${p.waitingReason}`);
    // Reported at once (not after the progress deadline): the scheduler has said why.
    else if (p.unschedulable && p.phase === 'Pending') failing.unshift(`${p.name}: Unschedulable`);
  }

  // Missing ordinals: PVC first, then the pod. Never blocked: creating only adds capacity.
  for (let i = 0; i < R; i++) {
    if (pods.some((p) => p.ordinal === i)) continue;
    if (!pvcs.has(i)) actions.push({ type: 'createPVC', ordinal: i, name: pvcName(o.name, i) });
    if (rejected !== null) holdForRejection(i, podName(o.name, i), 'not created');
    else actions.push({ type: 'createPod', ordinal: i, name: podName(o.name, i), revision: U });
  }

  const { status, complete } = computeStatus(o, now, { R, M, U, rejected, timedOut, failing, drainingSince, waits: [...waits.values()] });
  const prevProgressing = o.previousStatus?.conditions.find((c) => c.type === 'Progressing');
  if (complete && !(prevProgressing?.status === 'True' && prevProgressing.reason === 'RolloutComplete'))
    event('Normal', 'RolloutComplete', `All ${R} pod(s) at revision ${U} and Ready`, null);
  // Once per refused revision: the previous status already said so otherwise.
  if (rejected !== null && !(prevProgressing?.reason === 'ReplacementRejected' && o.previousStatus?.updateRevision === U))
    event('Warning', 'ReplacementRejected', `The API server refuses pods of revision ${U}; no pod is drained or deleted for it: ${rejected}`, null);

  const waiting = [...waits.values()].sort((a, b) => b.ordinal - a.ordinal);
  return { actions, waiting, requeueAfterMs, status, complete };
}

/** An API server message is quoted in status; its length is bounded (a condition's limit is 32 KiB). */
const MAX_REJECTION_CHARS = 2048;
function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}...`;
}

/**
 * Whether a pod at spec.updateRevision will be created: some desired ordinal has no live,
 * non-draining pod at that revision. Only then does the reconciler dry-run one first.
 */
export function replacementNeeded(o: ObservedState): boolean {
  const R = Math.max(0, Math.floor(o.spec.replicas));
  for (let i = 0; i < R; i++) {
    const current = o.pods.some((p) => p.ordinal === i && p.revision === o.spec.updateRevision && !isTerminating(p) && !isDraining(p) && p.phase !== 'Failed' && p.phase !== 'Succeeded');
    if (!current) return true;
  }
  return false;
}

/** The guards holding a pod back in this plan (empty when it is not waiting). */
export function waitingFor(plan: Plan, name: string): GuardName[] {
  return plan.waiting.find((w) => w.podName === name)?.guards ?? [];
}

export function actionsOf<T extends ActionType>(plan: Plan, type: T): Array<Extract<Action, { type: T }>> {
  return plan.actions.filter((a): a is Extract<Action, { type: T }> => a.type === type);
}

// ---- status -------------------------------------------------------------------------------

const TIMEOUT_PREFIX = 'Drains past drainTimeoutSeconds, waiting (onDrainTimeout=Wait): ';

/** Pods named in the previous DrainTimeout condition, so the Warning event fires once per pod. */
function timedOutPodsFromStatus(prev: AtlantisDeploymentStatus | null): string[] {
  const c = prev?.conditions.find((x) => x.type === 'Progressing');
  if (!c || c.reason !== 'DrainTimeout' || !c.message.startsWith(TIMEOUT_PREFIX)) return [];
  return c.message.slice(TIMEOUT_PREFIX.length).split(', ').filter(Boolean);
}

interface StatusInputs {
  R: number;
  M: number;
  U: string;
  /** The API server's refusal of pods at U, or null. */
  rejected: string | null;
  timedOut: string[];
  failing: string[];
  drainingSince: Map<string, Date>;
  waits: PodWait[];
}

function computeStatus(o: ObservedState, now: Date, s: StatusInputs): { status: AtlantisDeploymentStatus; complete: boolean } {
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
    if (prev?.currentRevision && (prev.currentRevision === U || outdatedRevs.has(prev.currentRevision))) currentRevision = prev.currentRevision;
    else if (outdatedRevs.size > 0) currentRevision = [...outdatedRevs.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]![0];
    else currentRevision = prev?.currentRevision || U;
  }

  const conds: Array<Omit<AtlantisCondition, 'lastTransitionTime' | 'observedGeneration'>> = [];
  conds.push(
    desiredAvailable >= R - M
      ? { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: `${desiredAvailable} of ${R} pod(s) available (maxUnavailable ${M})` }
      : { type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable', message: `${desiredAvailable} of ${R} pod(s) available, need ${R - M} (maxUnavailable ${M})` },
  );
  const waitSummary = s.waits
    .slice()
    .sort((a, b) => b.ordinal - a.ordinal)
    .map((w) => `${w.podName}: ${w.guards.join(', ')}`)
    .join('; ');
  const rejectedMessage = s.rejected === null ? '' : `The API server refuses pods of revision ${U}, so no pod is drained or deleted for it: ${s.rejected}`;
  let progressing: Omit<AtlantisCondition, 'lastTransitionTime' | 'observedGeneration'>;
  // First: nothing moves until the spec is fixed, whatever else waits.
  if (s.rejected !== null) progressing = { type: 'Progressing', status: 'False', reason: 'ReplacementRejected', message: rejectedMessage };
  else if (s.timedOut.length > 0) progressing = { type: 'Progressing', status: 'False', reason: 'DrainTimeout', message: `${TIMEOUT_PREFIX}${s.timedOut.join(', ')}` };
  else if (complete) progressing = { type: 'Progressing', status: 'True', reason: 'RolloutComplete', message: `All ${R} pod(s) at revision ${U} and Ready` };
  else if (s.failing.length > 0) progressing = { type: 'Progressing', status: 'False', reason: 'PodsFailing', message: `Pods failing: ${s.failing.join('; ')}` };
  else if (o.spec.paused) progressing = { type: 'Progressing', status: 'Unknown', reason: 'RolloutPaused', message: `Rollout paused${waitSummary ? `; waiting: ${waitSummary}` : ''}` };
  else progressing = { type: 'Progressing', status: 'True', reason: 'RolloutInProgress', message: waitSummary ? `Waiting: ${waitSummary}` : 'Applying changes' };
  conds.push(progressing);
  conds.push(
    o.spec.paused
      ? { type: 'Paused', status: 'True', reason: 'Paused', message: 'spec.paused is true: no new drain starts' }
      : { type: 'Paused', status: 'False', reason: 'NotPaused', message: 'Rollout not paused' },
  );
  conds.push(
    s.rejected !== null
      ? { type: 'Degraded', status: 'True', reason: 'ReplacementRejected', message: `${rejectedMessage}${s.failing.length > 0 ? `; pods failing: ${s.failing.join('; ')}` : ''}` }
      : s.failing.length > 0
        ? { type: 'Degraded', status: 'True', reason: 'PodsFailing', message: `Pods failing: ${s.failing.join('; ')}` }
        : { type: 'Degraded', status: 'False', reason: 'PodsHealthy', message: 'No pod is failing' },
  );

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
      const since = s.drainingSince.get(p.name) ?? (isDraining(p) ? drainStartTime(p) : null);
      return {
        name: p.name,
        revision: p.revision ?? '',
        ready: p.ready && p.phase === 'Running' && !isTerminating(p),
        drainingSince: since ? formatTime(since) : null,
        inProgressOperations: p.status?.ok ? p.status.body.in_progress_operations : null,
      };
    });

  const status: AtlantisDeploymentStatus = {
    observedGeneration: o.generation,
    replicas: live.length,
    readyReplicas: live.filter((p) => p.ready && p.phase === 'Running').length,
    updatedReplicas: live.filter((p) => p.revision === U).length,
    drainingReplicas: live.filter((p) => isDraining(p) || s.drainingSince.has(p.name)).length,
    currentRevision,
    updateRevision: U,
    selector: selectorString(o.name),
    conditions,
    pods,
  };
  return { status, complete };
}

/** Conditions by type, for callers that check one. */
export function condition(status: AtlantisDeploymentStatus, type: ConditionType): { status: ConditionStatus; reason: string } | undefined {
  const c = status.conditions.find((x) => x.type === type);
  return c ? { status: c.status, reason: c.reason } : undefined;
}
