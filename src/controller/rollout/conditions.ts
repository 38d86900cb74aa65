// The kstatus conditions (sigs.k8s.io/cli-utils/pkg/kstatus), beside the Deployment-style ones:
// `Reconciling` True while a rollout, surge or drain is in progress, `Stalled` True when it cannot
// go on by itself, `Ready` True only when the rollout is complete and available. kstatus, Flux's
// health checks and `kubectl wait --for=condition=Ready` read these; status.observedGeneration
// tells them whether the controller has seen the spec at all. Reconciling and Stalled are never
// True together: kstatus takes whichever it meets first in the list.
//
// Messages name the pods and what their servers report, never an elapsed time: a status that
// changed with every look would be written again on every reconcile.
import type { AtlantisCondition, ConditionStatus } from '../types.js';
import type { ObservedState, PodWait } from './plan.js';
import type { PodObservation } from './plan.js';
import { isDraining, isTerminating } from './pod-state.js';

export type KstatusCondition = Omit<AtlantisCondition, 'lastTransitionTime' | 'observedGeneration'>;

/** A pod whose drain runs (timed-out drains are in `timedOut` instead). */
export interface DrainFact {
  podName: string;
  /** What the server's last /status answer says, e.g. "1 operation(s) in progress". */
  detail: string;
}

/** What the decision needs, every field already known to computeStatus. */
export interface KstatusFacts {
  replicas: number;
  updateRevision: string;
  complete: boolean;
  /** Available: at least replicas - maxUnavailable desired pods serve. */
  available: boolean;
  paused: boolean;
  drainTimeoutSeconds: number;
  /** The API server's refusal of pods at updateRevision, or null. */
  rejected: string | null;
  /** Pods past drainTimeoutSeconds, waiting (onDrainTimeout Wait), with what their servers report. */
  timedOut: DrainFact[];
  /** "pod: reason" of pods that will not start by themselves. */
  failing: string[];
  /** Running drains, highest ordinal first. */
  drains: DrainFact[];
  /** Pods held back, highest ordinal first, with the names of the guards holding them. */
  waits: Array<Pick<PodWait, 'podName' | 'guards'>>;
}

/** Guards that say a drain is still running (not past its timeout). */
const DRAIN_GUARDS: ReadonlySet<string> = new Set(['DrainInProgress', 'OperationsInProgress', 'StatusUnreachable']);

/** What a draining pod's server last said, in stable words. */
export function drainDetail(p: PodObservation): string {
  const st = p.status;
  if (p.phase !== 'Running') return `pod ${p.phase}`;
  if (!st) return 'no /status answer yet';
  if (!st.ok) return '/status unreachable';
  if (!st.body.shutting_down) return 'server not shutting down yet';
  if (st.body.in_progress_operations === 0) return 'drained';
  return `${st.body.in_progress_operations} operation(s) in progress`;
}

const list = (ds: DrainFact[]): string => ds.map((d) => `${d.podName}: ${d.detail}`).join('; ');

/** Reconciling, Stalled and Ready, in that order. */
export function kstatusConditions(f: KstatusFacts): KstatusCondition[] {
  const stalled = stalledBy(f);
  if (stalled)
    return [
      cond('Reconciling', 'False', stalled.reason, `Not progressing: ${stalled.message}`),
      cond('Stalled', 'True', stalled.reason, stalled.message),
      cond('Ready', 'False', stalled.reason, stalled.message),
    ];
  if (f.complete && f.available) {
    const message = `All ${f.replicas} pod(s) at revision ${f.updateRevision} and Ready`;
    return [
      cond('Reconciling', 'False', 'RolloutComplete', message),
      cond('Stalled', 'False', 'RolloutComplete', message),
      cond('Ready', 'True', 'RolloutComplete', message),
    ];
  }
  const r = reconcilingBy(f);
  return [
    cond('Reconciling', 'True', r.reason, r.message),
    cond('Stalled', 'False', 'NotStalled', 'The rollout can go on by itself'),
    cond('Ready', 'False', r.reason, r.message),
  ];
}

function stalledBy(f: KstatusFacts): { reason: string; message: string } | null {
  // The order of the Progressing condition: a refused spec first, since nothing moves until it is fixed.
  if (f.rejected !== null)
    return {
      reason: 'ReplacementRejected',
      message: `The API server refuses pods of revision ${f.updateRevision}, so no pod is drained or deleted for it: ${f.rejected}`,
    };
  if (f.timedOut.length > 0)
    return {
      reason: 'DrainTimeout',
      message: `Drains past drainTimeoutSeconds ${f.drainTimeoutSeconds}, waiting (onDrainTimeout=Wait): ${list(f.timedOut)}`,
    };
  if (f.failing.length > 0 && !f.complete) return { reason: 'PodsFailing', message: `Pods failing: ${f.failing.join('; ')}` };
  return null;
}

function reconcilingBy(f: KstatusFacts): { reason: string; message: string } {
  const drainNames = new Set(f.drains.map((d) => d.podName));
  const others = f.waits.filter((w) => !drainNames.has(w.podName) && !w.guards.every((g) => DRAIN_GUARDS.has(g)));
  const waiting = others.map((w) => `${w.podName}: ${w.guards.join(', ')}`).join('; ');
  if (f.paused)
    return {
      reason: 'RolloutPaused',
      message: `Rollout paused (spec.paused), no new drain starts${f.drains.length > 0 ? `; draining ${list(f.drains)}` : ''}${waiting ? `; waiting: ${waiting}` : ''}`,
    };
  if (f.drains.length > 0)
    return { reason: 'DrainInProgress', message: `Draining ${list(f.drains)}${waiting ? `; waiting: ${waiting}` : ''}` };
  const first = others[0];
  if (first) return { reason: first.guards[0] ?? 'RolloutInProgress', message: `Waiting: ${waiting}` };
  return { reason: 'RolloutInProgress', message: `Rolling out revision ${f.updateRevision}` };
}

function cond(type: 'Reconciling' | 'Stalled' | 'Ready', status: ConditionStatus, reason: string, message: string): KstatusCondition {
  return { type, status, reason, message };
}

/** The facts from what computeStatus is given (its caller's inputs and its own complete/available). */
export function kstatusFacts(
  o: ObservedState,
  s: {
    R: number;
    U: string;
    rejected: string | null;
    timedOut: string[];
    failing: string[];
    drainsStarted: ReadonlySet<string>;
    waits: PodWait[];
  },
  complete: boolean,
  available: boolean,
): KstatusFacts {
  const timedOut = new Set(s.timedOut);
  const draining = o.pods
    .filter((p) => !isTerminating(p) && (isDraining(p) || s.drainsStarted.has(p.name)))
    .sort((a, b) => b.ordinal - a.ordinal || a.name.localeCompare(b.name));
  const fact = (p: PodObservation): DrainFact => ({ podName: p.name, detail: drainDetail(p) });
  return {
    replicas: s.R,
    updateRevision: s.U,
    complete,
    available,
    paused: o.spec.paused,
    drainTimeoutSeconds: o.spec.drainTimeoutSeconds,
    rejected: s.rejected,
    timedOut: draining.filter((p) => timedOut.has(p.name)).map(fact),
    failing: s.failing,
    drains: draining.filter((p) => !timedOut.has(p.name)).map(fact),
    waits: [...s.waits].sort((a, b) => b.ordinal - a.ordinal),
  };
}
