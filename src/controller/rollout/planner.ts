// The rollout planner (SPEC section 7): observed state in, actions out. Pure and level-based:
// it decides only from what is observed now (pods, their annotations, the last /status
// poll, the PVCs, the previous status), so a restarted controller, or another replica after
// a leader change, carries on exactly where the last one stopped. In four parts: classify
// each pod on its own (classify.ts), hold it back by named guards (guards.ts) while a budget
// pass hands out drains highest ordinal first, compute the status (status.ts), and derive
// the events of the change from the previous status (events.ts). The executor performs the
// actions in order and requeues after `requeueAfterMs`.
import { podName, podNaming, pvcName } from '../resources/names.js';
import { classifyPod, type PodView } from './classify.js';
import { transitionEvents } from './events.js';
import { holdingGuards, type GuardContext } from './guards.js';
import {
  DEFAULT_PROGRESS_DEADLINE_SECONDS,
  DEFAULT_STATUS_POLL_INTERVAL_MS,
  type Action,
  type ActionType,
  type EventReason,
  type GuardName,
  type ObservedState,
  type Plan,
  type PlannerOptions,
  type PodWait,
} from './plan.js';
import { formatTime, isAvailable, isDraining, isFailing, isTerminating } from './pod-state.js';
import { computeStatus } from './status.js';
import { planOrdinals } from './surge.js';

export * from './plan.js';
export * from './pod-state.js';
export { condition } from './status.js';

/** An API server message is quoted in status; its length is bounded (a condition's limit is 32 KiB). */
const MAX_REJECTION_CHARS = 2048;
function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}...`;
}

export function planRollout(o: ObservedState, now: Date, options: PlannerOptions = {}): Plan {
  const pollMs = options.statusPollIntervalMs ?? DEFAULT_STATUS_POLL_INTERVAL_MS;
  const deadlineS = options.progressDeadlineSeconds ?? DEFAULT_PROGRESS_DEADLINE_SECONDS;
  const { updateRevision: U, paused, drainTimeoutSeconds, onDrainTimeout } = o.spec;
  const R = Math.max(0, Math.floor(o.spec.replicas));
  // The CRD requires >= 1; a 0 would deadlock the rollout, so it is treated as 1.
  const M = Math.max(1, Math.floor(o.spec.maxUnavailable));
  const nowIso = formatTime(now);
  const rejected = o.replacementRejected ? truncate(o.replacementRejected, MAX_REJECTION_CHARS) : null;
  const dataClaims = o.spec.dataClaims ?? true;
  const naming = podNaming(dataClaims);
  // Two pods of one ordinal cannot share its PVC: no surge with one.
  const S = dataClaims ? 0 : Math.max(0, Math.floor(o.spec.maxSurge ?? 0));

  // Highest ordinal first: scale-down pods, then the rollout from the top.
  const pods = [...o.pods].sort((a, b) => b.ordinal - a.ordinal || a.name.localeCompare(b.name));
  const ordinals = planOrdinals(pods, {
    name: o.name,
    replicas: R,
    updateRevision: U,
    naming,
    maxSurge: S,
    paused,
    rejected: rejected !== null,
  });
  const { keepers, nextName } = ordinals;
  const views = pods.map((p) => classifyPod(p, { replicas: R, updateRevision: U, drainTimeoutSeconds, onDrainTimeout, now, keepers }));

  const drainsStarted = new Set<string>();
  // The budget: pods not-ready-or-draining (or missing) now. Drains granted below are added
  // as they are granted, so one pass never exceeds maxUnavailable.
  const unavailable = new Set<number>();
  for (let i = 0; i < R; i++) if (!pods.some((p) => p.ordinal === i && isAvailable(p))) unavailable.add(i);
  for (const p of pods) if (p.ordinal >= R && !isAvailable(p)) unavailable.add(p.ordinal);
  const guardContext: GuardContext = {
    paused,
    replacementRejected: rejected !== null,
    updateRevision: U,
    maxUnavailable: M,
    drainTimeoutSeconds,
    onDrainTimeout,
    unavailable,
    podName: (i) => {
      if (naming === 'ordinal') return podName(o.name, i);
      const live = pods.filter((p) => p.ordinal === i && !isTerminating(p)).map((p) => p.name);
      return live.length > 0 ? live.sort().join('/') : nextName(i);
    },
    // Available and not drained in this pass: two pods of an ordinal never both drain for free.
    servedBeside: (v) =>
      pods.some((p) => p.ordinal === v.pod.ordinal && p.name !== v.pod.name && isAvailable(p) && !drainsStarted.has(p.name)),
    maxSurge: S,
    surgeLimit: R + S,
    keepers,
    surgeHolds: ordinals.holds,
    nextName,
  };

  const actions: Action[] = [];
  const waits: PodWait[] = [];
  const deleted = new Set<string>();
  const wakeups: number[] = [];
  const notReadyInTime: string[] = [];
  for (const v of views) {
    const p = v.pod;
    if (v.stamp) actions.push({ type: 'stampDrainStart', ordinal: p.ordinal, podName: p.name, uid: p.uid, value: nowIso });
    const held = holdingGuards(v, guardContext);
    if (held.length > 0)
      waits.push({
        ordinal: p.ordinal,
        podName: p.name,
        guards: held.map((h) => h.name),
        message: `${v.summary}: ${held.map((h) => h.detail).join('; ')}`,
      });
    else {
      actions.push(...stepActions(v, { now, updateRevision: U, drainTimeoutSeconds }));
      if (v.step.kind === 'delete') deleted.add(p.name);
      if (v.step.kind === 'startDrain') {
        // The budget pass: this drain now holds budget for the lower ordinals that follow
        // (unless another pod of its ordinal serves).
        if (!guardContext.servedBeside(v)) unavailable.add(p.ordinal);
        drainsStarted.add(p.name);
        wakeups.push(pollMs);
      }
    }
    // A guard that lets go by itself after a while: plan again then.
    for (const h of held) if (h.releasesInMs !== undefined) wakeups.push(h.releasesInMs);
    // Keep polling a drain that may still end (Wait keeps polling past the timeout too).
    if (v.drain && !v.drain.drained && !(v.drain.pastTimeout && onDrainTimeout === 'Interrupt')) {
      wakeups.push(pollMs);
      if (drainTimeoutSeconds > 0 && !v.drain.pastTimeout) wakeups.push(drainTimeoutSeconds * 1000 - v.drain.elapsedMs);
    }
    if (v.step.kind === 'keep' && !isTerminating(p) && !isAvailable(p) && p.createdAt) {
      const ageMs = now.getTime() - p.createdAt.getTime();
      if (ageMs < deadlineS * 1000) wakeups.push(deadlineS * 1000 - ageMs);
      // No elapsed time in the message: status text must stay stable between reconciles.
      else if (!isFailing(p) && !p.unschedulable) notReadyInTime.push(`${p.name}: not Ready within ${deadlineS}s of creation`);
    }
  }

  // A pod deleted in this plan is being dealt with; only the failing pods that stay count.
  // Reported at once (not after the progress deadline): the container or the scheduler has said why.
  const failingNow: string[] = [];
  for (const p of [...pods].reverse()) {
    if (isTerminating(p) || deleted.has(p.name)) continue;
    if (isFailing(p)) failingNow.push(`${p.name}: ${p.waitingReason}`);
    else if (p.unschedulable && p.phase === 'Pending') failingNow.push(`${p.name}: Unschedulable`);
  }

  // Missing ordinals: PVC first, then the pod. Creating only adds capacity, so only a
  // refused replacement holds it (its PVC is still made). With a surge, surge.ts decided.
  const pvcs = new Set(o.pvcOrdinals);
  for (let i = 0; i < R; i++) {
    if (pods.some((p) => p.ordinal === i)) continue;
    if (dataClaims && !pvcs.has(i)) actions.push({ type: 'createPVC', ordinal: i, name: pvcName(o.name, i) });
    if (rejected !== null)
      waits.push({
        ordinal: i,
        podName: nextName(i),
        guards: ['ReplacementRejected'],
        message: `not created: the API server refuses pods of revision ${U}`,
      });
    else if (S === 0) actions.push({ type: 'createPod', ordinal: i, name: nextName(i), revision: U });
  }
  for (const c of ordinals.creates) {
    if (!c.surge) {
      actions.push({ type: 'createPod', ordinal: c.ordinal, name: c.name, revision: U });
      continue;
    }
    actions.push(
      { type: 'createPod', ordinal: c.ordinal, name: c.name, revision: U, surge: true },
      {
        type: 'emitEvent',
        eventType: 'Normal',
        reason: 'SurgePodCreated',
        message: `Creating pod ${c.name} at revision ${U} beside ${c.beside.join(', ')}, which drain once ${c.name} is Ready`,
        podName: c.name,
      },
    );
  }

  const timedOut = waits.filter((w) => w.guards.includes('DrainTimeout')).map((w) => w.podName);
  const drainingSince = new Map(views.map((v) => [v.pod.name, v.drainingSince ?? (drainsStarted.has(v.pod.name) ? now : null)]));
  const { status, complete } = computeStatus(o, now, {
    R,
    M,
    U,
    rejected,
    timedOut,
    failing: [...failingNow, ...notReadyInTime],
    drainingSince,
    drainsStarted,
    waits,
    surgeCreates: ordinals.creates.filter((c) => c.surge).length,
  });
  const drainDetail = new Map(views.flatMap((v) => (v.drain ? [[v.pod.name, v.drain.wait.detail] as const] : [])));
  actions.push(
    ...transitionEvents(o.previousStatus ?? null, status, { replicas: R, updateRevision: U, drainTimeoutSeconds, rejected, drainDetail }),
  );

  const waiting = waits.sort((a, b) => b.ordinal - a.ordinal);
  const requeueAfterMs = wakeups.length > 0 ? Math.max(0, Math.ceil(Math.min(...wakeups))) : null;
  return { actions, waiting, requeueAfterMs, status, complete };
}

/** The actions (and the events reporting them) of a pod's step that no guard holds. */
function stepActions(v: PodView, c: { now: Date; updateRevision: string; drainTimeoutSeconds: number }): Action[] {
  const p = v.pod;
  const event = (eventType: 'Normal' | 'Warning', reason: EventReason, message: string): Action => ({
    type: 'emitEvent',
    eventType,
    reason,
    message,
    podName: p.name,
  });
  if (v.step.kind === 'startDrain')
    return [
      { type: 'startDrain', ordinal: p.ordinal, podName: p.name, uid: p.uid, value: formatTime(c.now) },
      event('Normal', 'DrainStarted', `Draining pod ${p.name}: ${v.step.why}`),
    ];
  if (v.step.kind === 'keep') return [];
  const { reason } = v.step;
  const drainStart = reason === 'Drained' || reason === 'DrainTimeout' ? (v.drain?.start ?? null) : null;
  const drainDurationSeconds = drainStart ? Math.max(0, (c.now.getTime() - drainStart.getTime()) / 1000) : null;
  const out: Action[] = [
    { type: 'deletePod', ordinal: p.ordinal, podName: p.name, uid: p.uid, reason, replace: v.replace, drainDurationSeconds },
  ];
  if (reason === 'Drained')
    out.push(
      event(
        'Normal',
        'Drained',
        `Pod ${p.name} drained${drainDurationSeconds !== null ? ` after ${Math.round(drainDurationSeconds)}s` : ''}: no operation in progress`,
      ),
    );
  if (reason === 'DrainTimeout')
    out.push(
      event(
        'Warning',
        'DrainTimeout',
        `Pod ${p.name} still draining after ${c.drainTimeoutSeconds}s; deleting it (onDrainTimeout=Interrupt), the server interrupts terraform cleanly`,
      ),
    );
  if (v.replace)
    out.push(
      event(
        'Normal',
        'PodReplaced',
        `Deleting pod ${p.name} (revision ${p.revision ?? 'none'}, ${reason}) to recreate it at revision ${c.updateRevision}`,
      ),
    );
  else if (v.replacedBy !== null)
    out.push(
      event('Normal', 'PodReplaced', `Deleting pod ${p.name} (revision ${p.revision ?? 'none'}, ${reason}): ${v.replacedBy} replaces it`),
    );
  return out;
}

/**
 * Whether a pod at spec.updateRevision will be created: some desired ordinal has no live,
 * non-draining pod at that revision. Only then does the reconciler dry-run one first.
 */
export function replacementNeeded(o: ObservedState): boolean {
  const R = Math.max(0, Math.floor(o.spec.replicas));
  for (let i = 0; i < R; i++) {
    const current = o.pods.some(
      (p) =>
        p.ordinal === i &&
        p.revision === o.spec.updateRevision &&
        !isTerminating(p) &&
        !isDraining(p) &&
        p.phase !== 'Failed' &&
        p.phase !== 'Succeeded',
    );
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
