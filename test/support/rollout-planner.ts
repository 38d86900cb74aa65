// Fixtures for the rollout planner's tests: observed pods and states, and short views of a plan.
import {
  actionsOf,
  formatTime,
  waitingFor,
  type GuardName,
  type ObservedState,
  type Plan,
  type PodObservation,
  type RolloutSpec,
} from '../../src/controller/rollout/index.js';
import type { AtlantisDeploymentStatus, StatusProbe } from '../../src/controller/types.js';

export const NOW = new Date('2026-06-01T12:00:00Z');
export const OLD = 'aaaaaaaaaa';
export const NEW = 'bbbbbbbbbb';
export const ago = (s: number): Date => new Date(NOW.getTime() - s * 1000);

export const probe = (shutting: boolean, ops: number): StatusProbe => ({
  ok: true,
  at: NOW,
  body: { shutting_down: shutting, in_progress_operations: ops, version: '1' },
});
export const DRAINED = probe(true, 0);
export const unreachable: StatusProbe = { ok: false, error: 'connect ECONNREFUSED', at: NOW };

export function pod(ordinal: number, o: Partial<PodObservation> = {}): PodObservation {
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
export const old = (ordinal: number, o: Partial<PodObservation> = {}): PodObservation => pod(ordinal, { revision: OLD, ...o });
/** A pod whose drain annotation was set `secondsAgo` (a draining server is not Ready). */
export const draining = (
  ordinal: number,
  secondsAgo: number,
  status: StatusProbe | null,
  o: Partial<PodObservation> = {},
): PodObservation => old(ordinal, { drainAnnotation: formatTime(ago(secondsAgo)), ready: false, status, ...o });

export function observed(pods: PodObservation[], spec: Partial<RolloutSpec> = {}, extra: Partial<ObservedState> = {}): ObservedState {
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
export function summary(plan: Plan): string[] {
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
      default:
        return a satisfies never;
    }
  });
}
export const events = (plan: Plan): string[] =>
  actionsOf(plan, 'emitEvent').map((e) => `${e.eventType} ${e.reason}${e.podName ? ` ${e.podName}` : ''}`);
export const cond = (plan: Plan, type: string): string => {
  const c = plan.status.conditions.find((x) => x.type === type);
  return c ? `${c.status}/${c.reason}` : 'missing';
};

export interface Row {
  name: string;
  state: ObservedState;
  now?: Date;
  actions: string[];
  waiting?: Record<string, GuardName[]>;
  events?: string[];
  conditions?: Record<string, string>;
  check?: (plan: Plan) => void;
}

export const completeStatus = (rev: string): AtlantisDeploymentStatus => ({
  observedGeneration: 6,
  replicas: 3,
  readyReplicas: 3,
  updatedReplicas: 3,
  drainingReplicas: 0,
  currentRevision: rev,
  updateRevision: rev,
  selector: 'app.kubernetes.io/name=atlantis,app.kubernetes.io/instance=atlantis',
  conditions: [
    {
      type: 'Available',
      status: 'True',
      reason: 'MinimumReplicasAvailable',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 6,
    },
    {
      type: 'Progressing',
      status: 'True',
      reason: 'RolloutComplete',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 6,
    },
    {
      type: 'Paused',
      status: 'False',
      reason: 'NotPaused',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 6,
    },
    {
      type: 'Degraded',
      status: 'False',
      reason: 'PodsHealthy',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 6,
    },
    ...(['Reconciling', 'Stalled', 'Ready'] as const).map((type) => ({
      type,
      status: type === 'Ready' ? ('True' as const) : ('False' as const),
      reason: 'RolloutComplete',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 6,
    })),
  ],
  pods: [],
});

/** Held by the budget that higher ordinals (rolling out first) hold. */
export const HELD: GuardName[] = ['HigherOrdinalFirst'];
/** What the API server answered a dry-run create of a pod with `limits.memory: 2GB`. */
export const REJECTED =
  'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression \'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$\'';
export const rejectedState = (pods: PodObservation[], spec: Partial<RolloutSpec> = {}, extra: Partial<ObservedState> = {}): ObservedState =>
  observed(pods, spec, { replacementRejected: REJECTED, ...extra });
export const REJECTED_CONDITIONS = {
  Available: 'True/MinimumReplicasAvailable',
  Progressing: 'False/ReplacementRejected',
  Degraded: 'True/ReplacementRejected',
};

/** Plans a row and checks what it states. */
export function checkRow(row: Row, plan: Plan, assert: typeof import('node:assert/strict')): void {
  assert.deepEqual(summary(plan), row.actions, 'actions');
  for (const [name, guards] of Object.entries(row.waiting ?? {})) assert.deepEqual(waitingFor(plan, name), guards, `guards of ${name}`);
  if (row.events) assert.deepEqual(events(plan), row.events, 'events');
  for (const [type, want] of Object.entries(row.conditions ?? {})) assert.equal(cond(plan, type), want, `condition ${type}`);
  row.check?.(plan);
}
