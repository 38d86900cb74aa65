// Events that report a change of state, derived by comparing the previous structured status
// with the new one, so each fires once per change however often the controller looks (and
// whatever the conditions' human messages say). Events that report an action (DrainStarted,
// Drained, PodReplaced, an Interrupt's DrainTimeout) are planned with the action itself.
import type { AtlantisDeploymentStatus } from '../types.js';
import type { Action } from './plan.js';

type EventAction = Extract<Action, { type: 'emitEvent' }>;

export interface TransitionFacts {
  replicas: number;
  updateRevision: string;
  drainTimeoutSeconds: number;
  /** The API server's refusal of pods at the update revision, or null. */
  rejected: string | null;
  /** Per pod name: why its drain is not over, for the DrainTimeout event's message. */
  drainDetail: ReadonlyMap<string, string>;
}

const progressing = (s: AtlantisDeploymentStatus | null): { status: string; reason: string } | undefined =>
  s?.conditions.find((c) => c.type === 'Progressing');

export function transitionEvents(prev: AtlantisDeploymentStatus | null, next: AtlantisDeploymentStatus, f: TransitionFacts): EventAction[] {
  const events: EventAction[] = [];
  const before = new Set(prev?.timedOutPods ?? []);
  for (const name of next.timedOutPods ?? []) {
    if (before.has(name)) continue;
    const detail = f.drainDetail.get(name);
    events.push({
      type: 'emitEvent',
      eventType: 'Warning',
      reason: 'DrainTimeout',
      message: `Pod ${name} still draining after ${f.drainTimeoutSeconds}s${detail ? ` (${detail})` : ''}; waiting (onDrainTimeout=Wait)`,
      podName: name,
    });
  }
  const was = progressing(prev);
  const now = progressing(next);
  if (now?.reason === 'RolloutComplete' && !(was?.status === 'True' && was.reason === 'RolloutComplete'))
    events.push({
      type: 'emitEvent',
      eventType: 'Normal',
      reason: 'RolloutComplete',
      message: `All ${f.replicas} pod(s) at revision ${f.updateRevision} and Ready`,
      podName: null,
    });
  // Once per refused revision: the previous status already said so otherwise.
  if (
    f.rejected !== null &&
    now?.reason === 'ReplacementRejected' &&
    !(was?.reason === 'ReplacementRejected' && prev?.updateRevision === f.updateRevision)
  )
    events.push({
      type: 'emitEvent',
      eventType: 'Warning',
      reason: 'ReplacementRejected',
      message: `The API server refuses pods of revision ${f.updateRevision}; no pod is drained or deleted for it: ${f.rejected}`,
      podName: null,
    });
  return events;
}
