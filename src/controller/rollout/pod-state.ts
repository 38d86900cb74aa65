// Facts about one observed pod, each read from the observation alone (no plan state).
import { drainRequested, reportsDrained } from '../../contract/drain-protocol.js';
import type { StatusProbe } from '../types.js';
import type { PodObservation } from './plan.js';

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

export const isTerminating = (p: PodObservation): boolean => p.deletionTimestamp !== null;
export const isDraining = (p: PodObservation): boolean => drainRequested(p.drainAnnotation);
export const isFailing = (p: PodObservation): boolean => p.waitingReason !== null && FAILING_WAITING_REASONS.has(p.waitingReason);
/** Running with a container that is not stuck restarting: terraform may be running in it. */
export const isRunning = (p: PodObservation): boolean => p.phase === 'Running' && !isFailing(p);
/** The container is gone for good: nothing to drain. */
export const isFinished = (p: PodObservation): boolean => p.phase === 'Failed' || p.phase === 'Succeeded';
/** The end of a drain: the server shuts down and runs nothing. Final for a server process. */
export const isDrained = (st: StatusProbe | null | undefined): boolean => !!st?.ok && reportsDrained(st.body);
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
